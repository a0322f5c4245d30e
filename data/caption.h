// Captions on images: a built-in 3x5 pixel font (upper-case letters, digits and a few
// signs) so that grids written for eyeballing say what they show without a font file.
#pragma once

#include <string>
#include <vector>

#include "data/image.h"

namespace zt::data {

/// `img` with a dark band on top holding `text` in white, word-wrapped to the image's
/// width, each font pixel drawn as scale x scale (scale 0: the largest of 1 and 2 that
/// fits "WWWWWWWWWWWW" on one line). Lower-case letters print as upper case; a character
/// the font lacks prints as '?'.
Image with_caption(const Image& img, const std::string& text, int scale = 0);

/// The images one above the other, left-aligned, on a grey background.
Image stack_images(const std::vector<Image>& images);

}  // namespace zt::data

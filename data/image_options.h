// How an image takes a clip's fixed height x width (the resampling filter and the fit),
// and what a folder of images does with a file that does not decode. Shared by the image
// functions (data/image.h, data/image_folder.h) and the data config (data/data_config.h),
// which name the same settings.
#pragma once

namespace zt::data {

/// The resampling filter (Pillow's BILINEAR or BICUBIC, data/resample.h).
enum class Filter { bilinear, bicubic };
/// How an image takes a fixed height x width of another aspect ratio: crop scales it to
/// cover the size (the side that fits exactly) and cuts the middle out (for a square size,
/// torchvision's Resize(size) + CenterCrop(size)); stretch scales each side on its own.
enum class Fit { crop, stretch };
/// What an image folder does with a file whose header reads but whose data does not decode
/// (corrupt or truncated): error ends the run naming it; skip reads the next image of the
/// folder in its place (the same one every run and every resume) and names the file once.
enum class OnBadImage { error, skip };

}  // namespace zt::data

// Image decoding on top of stb (writing PNGs: data/png_write.cpp); resizing is Pillow's
// resampling (data/resample.cpp).
#include "data/image.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <sys/stat.h>

#include "core/error.h"
#include "core/ops/factory.h"
#include "data/image_palette.h"
#include "data/resample.h"
#include "data/stb_alloc.h"
#include "stb_image.h"

namespace zt::data {

namespace {

// What PIL refuses to decode (twice its MAX_IMAGE_PIXELS): a small compressed file can
// hold an image that takes gigabytes once decoded.
constexpr int64_t kMaxPixels = 178'956'970;

// h and w are a header's sides, up to 2^32 - 1 each (a PNG's IHDR): their product is
// counted unsigned, where it fits, as h * w in int64 would not.
void check_pixels(const std::string& path, int64_t h, int64_t w) {
  if (h <= 0 || w <= 0) return;  // an empty size is its reader's error
  const uint64_t pixels = static_cast<uint64_t>(h) * static_cast<uint64_t>(w);
  ZT_CHECK(pixels <= static_cast<uint64_t>(kMaxPixels), "image '", path, "' is ", h, "x", w, " = ",
           pixels, " pixels, more than zt decodes (", kMaxPixels,
           ", PIL's limit): downscale it first");
}

constexpr unsigned char kPngSignature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

// A big-endian 32-bit number, as PNG writes them.
uint32_t be32(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

// An open image file, closed when it goes; every reader below starts at its beginning.
using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

File open_file(const std::string& path) {
  return File(std::fopen(path.c_str(), "rb"), std::fclose);
}

// A PNG's size from its IHDR chunk (the first after the signature), for the images stb's
// header query refuses (RGB past 2^30 bytes decoded): {0, 0} when `f` is no PNG.
std::pair<int64_t, int64_t> png_size(std::FILE* f) {
  unsigned char b[24] = {};
  std::rewind(f);
  const size_t got = std::fread(b, 1, sizeof b, f);
  if (got < sizeof b || std::memcmp(b, kPngSignature, 8) != 0 ||
      std::memcmp(b + 12, "IHDR", 4) != 0)
    return {0, 0};
  return {be32(b + 20), be32(b + 16)};
}

// crc = PNG's CRC-32 (reflected, polynomial 0xEDB88320) continued over n bytes, before
// its final inversion.
uint32_t crc32_update(uint32_t crc, const unsigned char* data, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
      t[i] = c;
    }
    return t;
  }();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xffu] ^ (crc >> 8);
  return crc;
}

// Why the PNG `f` is damaged: its first chunk whose CRC-32 does not match its type and
// data ("" when every whole chunk matches, and for another format). stb checks no CRC, so
// a flipped bit in the compressed pixels decodes into other pixels without a word (PIL
// refuses such pixel data; zt refuses a bad CRC in any chunk). A file cut short is left
// to the decoder.
std::string png_damage(std::FILE* f) {
  unsigned char head[8] = {};
  std::rewind(f);
  if (std::fread(head, 1, 8, f) != 8 || std::memcmp(head, kPngSignature, 8) != 0) return "";
  std::vector<unsigned char> buf(size_t{1} << 16);
  for (int64_t at = 8; std::fread(head, 1, 8, f) == 8;) {  // length, type
    const uint32_t length = be32(head);
    uint32_t crc = crc32_update(0xffffffffu, head + 4, 4);
    for (uint32_t left = length; left > 0;) {
      const size_t n = std::min<size_t>(left, buf.size());
      if (std::fread(buf.data(), 1, n, f) != n) return "";
      crc = crc32_update(crc, buf.data(), n);
      left -= static_cast<uint32_t>(n);
    }
    unsigned char stored[4] = {};
    if (std::fread(stored, 1, 4, f) != 4) return "";
    const std::string type(head + 4, head + 8);
    if ((crc ^ 0xffffffffu) != be32(stored))
      return detail::cat("its ", type, " chunk at byte ", at,
                         " fails its CRC-32 check: the file was changed after it was written");
    if (type == "IEND") return "";
    at += 12 + int64_t{length};
  }
  return "";
}

// The head of the JPEG `f`, read from just after its magic: its bytes up to its first scan
// (the SOS marker) or its end (EOI), segment by segment, which hold every table and the
// frame header that a header query reads, and none of the entropy-coded data after them.
std::vector<unsigned char> read_jpeg_head(std::FILE* f) {
  std::vector<unsigned char> b{0xff, 0xd8};
  auto take = [&](size_t n) {  // appends the next n bytes; false where the file ends first
    const size_t at = b.size();
    b.resize(at + n);
    b.resize(at + std::fread(b.data() + at, 1, n, f));
    return b.size() == at + n;
  };
  for (;;) {
    if (!take(1)) return b;
    if (b.back() != 0xff) continue;  // not a marker: kept for stb to judge
    do {
      if (!take(1)) return b;
    } while (b.back() == 0xff);  // fill bytes before the marker
    const unsigned char m = b.back();
    if (m == 0xda || m == 0xd9) return b;
    if (m == 0x00 || m == 0x01 || (m >= 0xd0 && m <= 0xd8)) continue;  // no length follows
    if (!take(2)) return b;
    const size_t length = (static_cast<size_t>(b[b.size() - 2]) << 8) | b.back();
    if (length < 2 || !take(length - 2)) return b;
  }
}

// The whole file `f` when it is a JPEG (it starts with FF D8), or its head alone (up to its
// first scan) when `whole` is false, else nothing: its Huffman tables are checked in these
// bytes (jpeg_damage) and stb reads them from memory, so the file is read once. Read from
// where fopen left it, without a seek that would read its first bytes again; a file that
// shrank since its size was taken is read as it now is.
std::vector<unsigned char> read_jpeg(std::FILE* f, bool whole) {
  struct stat st {};
  unsigned char magic[2] = {};
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 2 ||
      std::fread(magic, 1, 2, f) != 2 || magic[0] != 0xff || magic[1] != 0xd8) {
    std::rewind(f);
    return {};
  }
  if (!whole) return read_jpeg_head(f);
  std::vector<unsigned char> b(static_cast<size_t>(st.st_size));
  b[0] = magic[0];
  b[1] = magic[1];
  b.resize(2 + std::fread(b.data() + 2, 1, b.size() - 2, f));
  return b;
}

// Why the JPEG `b` (a file's bytes) is damaged where stb would not notice: a Huffman table
// (DHT) of more codes than the 256 a table holds, which stb's table builder writes past its
// arrays for, even in its header query; or, in a whole file, a frame component that no
// scan fills (in a progressive frame: no first DC scan, which clears its blocks), which stb
// decodes from memory nothing was written to. "" for a sound file, and for another format.
// Only the marker segments are walked: the entropy-coded data between them is skipped by
// memchr (a byte-at-a-time read costs more than the walk).
std::string jpeg_damage(const std::vector<unsigned char>& b) {
  if (b.size() < 2 || b[0] != 0xff || b[1] != 0xd8) return "";
  // The byte at i, 0 past the end (as stb reads a count there).
  auto at = [&](size_t i) -> int { return i < b.size() ? b[i] : 0; };
  std::vector<int> components;  // the frame's (SOF) ids, in order
  std::vector<bool> filled;     // by the frame's order: a scan holds it (the first of its id)
  bool progressive = false;
  for (size_t i = 2; i < b.size();) {
    const void* ff = std::memchr(b.data() + i, 0xff, b.size() - i);
    if (!ff) return "";
    i = static_cast<size_t>(static_cast<const unsigned char*>(ff) - b.data()) + 1;
    if (i >= b.size()) return "";
    if (b[i] == 0xd9) {  // the end of the image: every component has been filled, or not
      for (size_t k = 0; k < components.size(); ++k)
        if (!filled[k])
          return detail::cat("its component ", k + 1, " of ", components.size(), " (id ",
                             components[k], ") is in none of its ",
                             progressive ? "first DC scans" : "scans",
                             ", so its pixels would be whatever memory held");
      return "";
    }
    const int m = b[i];
    if (m == 0xff) continue;                                   // fill: the marker follows
    if (m == 0x00 || m == 0x01 || (m >= 0xd0 && m <= 0xd8)) {  // stuffed byte, no length
      ++i;
      continue;
    }
    const size_t marker = i - 1, length = (static_cast<size_t>(at(i + 1)) << 8) | at(i + 2);
    if (i + 2 >= b.size() || length < 2) return "";
    size_t next = i + 1 + length;
    if (m == 0xc0 || m == 0xc1 || m == 0xc2) {  // the frames stb reads: Nf, then 3 bytes each
      progressive = m == 0xc2;
      for (int k = 0; k < at(i + 8); ++k)
        components.push_back(at(i + 9 + 3 * static_cast<size_t>(k)));
      filled.assign(components.size(), false);
    }
    if (m == 0xda) {  // Ns, 2 bytes each, then the first and last coefficient and Ah, Al
      const size_t ns = static_cast<size_t>(at(i + 3));
      if (!progressive || (at(i + 4 + 2 * ns) == 0 && at(i + 6 + 2 * ns) >> 4 == 0))
        for (size_t k = 0; k < ns; ++k) {  // stb fills the first component of the id
          const auto c = std::find(components.begin(), components.end(), at(i + 4 + 2 * k));
          if (c != components.end()) filled[static_cast<size_t>(c - components.begin())] = true;
        }
    }
    if (m == 0xc4) {
      next = i + 3;
      for (long left = static_cast<long>(length) - 2; left > 0;) {  // as stb reads them
        int codes = 0;  // after the table's class and number
        for (size_t k = 0; k < 16; ++k) codes += at(next + 1 + k);
        if (codes > 256)
          return detail::cat("its DHT segment at byte ", marker, " defines a Huffman table of ",
                             codes, " codes, more than the 256 a table holds");
        left -= 17 + codes;
        next += 17 + static_cast<size_t>(codes);
      }
    }
    i = next;
  }
  return "";
}

// An image file open; `bytes` holds what a check read of it (a JPEG: read_jpeg, the whole
// file, or its head for a header query; a palette PNG: the file with its palette padded,
// pad_png_palette), and stb then reads those bytes instead of the file.
struct OpenFile {
  File f{nullptr, std::fclose};
  std::vector<unsigned char> bytes;
  // The bytes stb reads from memory (stb counts in int): none for a file over 2 GiB, which
  // it reads through the file.
  bool in_memory() const { return !bytes.empty() && bytes.size() <= INT_MAX; }
};

// stb's header query of `o` (the file at `path`) into h, w, with an image too large to
// decode refused by its size; false (stbi_failure_reason says why) when stb cannot tell
// the size.
bool header_size(const std::string& path, const OpenFile& o, int& h, int& w) {
  int n = 0;
  std::rewind(o.f.get());
  if (o.in_memory()
          ? stbi_info_from_memory(o.bytes.data(), static_cast<int>(o.bytes.size()), &w, &h, &n)
          : stbi_info_from_file(o.f.get(), &w, &h, &n)) {
    // A BMP stored top-down has a negative height in its header, which stb's query passes
    // on as it is (its decoder takes the magnitude).
    if (h < 0) h = h == INT_MIN ? INT_MAX : -h;
    check_pixels(path, h, w);
    return true;
  }
  const auto [ph, pw] = png_size(o.f.get());
  if (ph > 0 && pw > 0) check_pixels(path, ph, pw);
  return false;
}

// Why stb reads no header in `o`. Its query tries every format and, where none reads the
// file, says only that ("Image not of any known type"); a file whose magic names a format zt
// reads (PNG, JPEG, BMP) gets the reason its own decoder gives instead (an RLE-compressed
// BMP, a 12-bit JPEG), from a load that its header already stops.
std::string header_failure(const OpenFile& o) {
  const std::string unknown =
      std::string(stbi_failure_reason()) + " (zt reads PNG, JPEG, BMP and TGA files)";
  unsigned char m[8] = {};
  std::rewind(o.f.get());
  const size_t got = std::fread(m, 1, sizeof m, o.f.get());
  const bool known = (got == 8 && std::memcmp(m, kPngSignature, 8) == 0) ||
                     (got >= 2 && ((m[0] == 0xff && m[1] == 0xd8) || (m[0] == 'B' && m[1] == 'M')));
  if (!known) return unknown;
  const StbAllocCap cap(size_t{1} << 20);  // a header's tables: no pixels get that far
  int w = 0, h = 0, n = 0;
  std::rewind(o.f.get());
  unsigned char* px =
      o.in_memory()
          ? stbi_load_from_memory(o.bytes.data(), static_cast<int>(o.bytes.size()), &w, &h, &n, 3)
          : stbi_load_from_file(o.f.get(), &w, &h, &n, 3);
  if (px == nullptr) return stbi_failure_reason();
  stbi_image_free(px);
  return unknown;
}

// The file at `path` open, with its header's size in h, w; an empty File and `why` when it
// does not open (gone since its folder was listed, unreadable) or stb reads no header. A
// JPEG is read whole, or only its head (enough for h and w, not to decode) when `whole` is
// false.
OpenFile open_image(const std::string& path, int& h, int& w, std::string& why, bool whole) {
  OpenFile o;
  // Opened, a FIFO with no writer would block forever; a folder or a device is no image.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    why = S_ISDIR(st.st_mode)    ? "it is a folder, not an image file"
          : S_ISFIFO(st.st_mode) ? "it is a FIFO (a named pipe), not a regular file"
                                 : "it is a device or socket, not a regular file";
    return o;
  }
  o.f = open_file(path);
  if (!o.f) {
    why = std::string("cannot open it: ") + std::strerror(errno);
    return o;
  }
  o.bytes = read_jpeg(o.f.get(), whole);
  if (const std::string damage = jpeg_damage(o.bytes); !damage.empty()) {
    why = "corrupt file (" + damage + ")";
    o.f.reset();
  } else if (!header_size(path, o, h, w)) {
    why = header_failure(o);
    o.f.reset();
  }
  return o;
}

// A file stb decodes through callbacks that note a read past its end. stb's BMP and TGA
// decoders do not check for the end of the file: they take zeros (or, for a row read
// whole, what the buffer held) for the missing bytes, so a truncated file decodes as an
// image with a made-up bottom. Its PNG and JPEG decoders check for themselves (a truncated
// one fails), so a read past the end counts for the other formats only: a JPEG's decoder
// may look for one more marker at the very end.
struct Reader {
  // stb refills its own buffer (the destination of its first read, which is a refill),
  // and the last refill of a whole file comes back short; any other read (a row read
  // whole into the image) comes back short only when the file ends before it. Refills are
  // told by their destination: a row may be as long as a refill.
  std::FILE* f = nullptr;
  const char* refill = nullptr;
  bool past_end = false;
  static int read(void* user, char* data, int size) {
    auto* r = static_cast<Reader*>(user);
    if (r->refill == nullptr) r->refill = data;
    const size_t got = std::fread(data, 1, static_cast<size_t>(size), r->f);
    if (size > 0 && (got == 0 || (got < static_cast<size_t>(size) && data != r->refill)))
      r->past_end = true;
    return static_cast<int>(got);
  }
  static void skip(void* user, int n) { std::fseek(static_cast<Reader*>(user)->f, n, SEEK_CUR); }
  static int eof(void* user) {
    std::FILE* f = static_cast<Reader*>(user)->f;
    const int c = std::fgetc(f);
    if (c == EOF) return 1;
    std::ungetc(c, f);
    return 0;
  }
};

// The most one allocation of stb's decoders needs for an h x w image (its header's
// size): a PNG's inflated rows of up to 8 bytes a pixel (16-bit RGBA) and a filter byte,
// or a JPEG's component planes padded to whole blocks, twice over, and 1 MiB to spare.
// Twice: stb grows its buffers for the compressed stream and for the inflated rows by
// doubling, and an interlaced PNG inflates to a little more than its first estimate (a
// filter byte per row of each of the 7 passes), so a valid 16-bit image may ask for
// nearly twice its size. Data that inflates past it (a decompression bomb behind a small
// header) fails as out of memory.
size_t decode_cap(int64_t h, int64_t w) {
  return 2 * static_cast<size_t>((h + 16) * (8 * (w + 16) + 1)) + (size_t{1} << 20);
}

// Decodes the file `o` (an h x w image by its header) as 8-bit RGB; *truncated tells a file
// that ended before the decoder was done (its pixels are then partly made up). Null when
// stb fails (stbi_failure_reason).
unsigned char* decode_rgb(const OpenFile& o, int& h, int& w, bool& truncated) {
  const StbAllocCap cap(decode_cap(h, w));
  int n = 0;
  truncated = false;
  if (o.in_memory())  // a JPEG or a PNG, whose decoders check for the end of their data
    return stbi_load_from_memory(o.bytes.data(), static_cast<int>(o.bytes.size()), &w, &h, &n, 3);
  Reader r;
  r.f = o.f.get();
  std::rewind(r.f);
  unsigned char magic[2] = {};
  const bool png_or_jpeg =
      std::fread(magic, 1, 2, r.f) == 2 &&
      ((magic[0] == 0x89 && magic[1] == 'P') || (magic[0] == 0xff && magic[1] == 0xd8));
  std::rewind(r.f);
  const stbi_io_callbacks io{Reader::read, Reader::skip, Reader::eof};
  unsigned char* px = stbi_load_from_callbacks(&io, &r, &w, &h, &n, 3);
  truncated = r.past_end && !png_or_jpeg;
  return px;
}

}  // namespace

bool try_load_image(const std::string& path, Image& img, std::string& why) {
  int w = 0, h = 0;
  // One open: the header, the CRCs, the pixels; a JPEG is read once, into memory.
  OpenFile o = open_image(path, h, w, why, /*whole=*/true);
  if (!o.f) return false;
  if (h <= 0 || w <= 0) {
    why = detail::cat("its header gives an empty size ", h, "x", w);
    return false;
  }
  std::string damage = o.bytes.empty() ? png_damage(o.f.get()) : "";
  if (damage.empty() && o.bytes.empty()) damage = bmp_palette_damage(o.f.get());
  if (!damage.empty()) {
    why = "corrupt file (" + damage + ")";
    return false;
  }
  // A palette PNG whose palette is short of its indices' range: decoded from its bytes with
  // the palette padded, so an index past it shows as the padding's colour.
  PaddedPng padded;
  if (o.bytes.empty() && pad_png_palette(o.f.get(), padded)) o.bytes = std::move(padded.bytes);
  bool truncated = false;
  unsigned char* px = decode_rgb(o, h, w, truncated);
  if (px != nullptr && truncated) {
    stbi_image_free(px);
    why = detail::cat("truncated file (its header reads as a ", h, "x", w,
                      " image, but the file ends before its pixels do)");
    return false;
  }
  if (px == nullptr) {
    // The format is one stb reads (its header did): the data after it is damaged, most
    // often a download or copy that stopped early.
    why = detail::cat("corrupt or truncated file (its header reads as a ", h, "x", w,
                      " image, but decoding failed: ", stbi_failure_reason(), ")");
    return false;
  }
  if (padded.colours > 0) damage = png_palette_damage(padded, px, h, w);
  if (!damage.empty()) {
    stbi_image_free(px);
    why = "corrupt file (" + damage + ")";
    return false;
  }
  img.height = h;
  img.width = w;
  img.rgb.assign(px, px + static_cast<size_t>(w) * h * 3);
  stbi_image_free(px);
  return true;
}

Image load_image(const std::string& path) {
  Image img;
  std::string why;
  ZT_CHECK(try_load_image(path, img, why), "cannot read image '", path, "': ", why,
           "; remove or replace the file");
  return img;
}

std::pair<int64_t, int64_t> image_size(const std::string& path) {
  int w = 0, h = 0;
  std::string why;
  ZT_CHECK(open_image(path, h, w, why, /*whole=*/false).f, "cannot read image '", path, "': ", why);
  ZT_CHECK(w > 0 && h > 0, "image '", path, "' has an empty size ", h, "x", w);
  return {h, w};  // header_size checked the pixel count
}

// resize_image's argument checks.
static void check_resize_args(const Image& img, int64_t height, int64_t width) {
  ZT_CHECK(height >= 1 && width >= 1, "resize_image: target size ", height, "x", width,
           " must be positive");
  ZT_CHECK(static_cast<int64_t>(img.rgb.size()) == img.height * img.width * 3,
           "resize_image: the buffer holds ", img.rgb.size(), " bytes, not ", img.height, "x",
           img.width, "x3");
  ZT_CHECK(img.height >= 1 && img.width >= 1, "resize_image: the source image is empty (",
           img.height, "x", img.width, ")");
}

Image resize_image(const Image& img, int64_t height, int64_t width, Filter filter) {
  check_resize_args(img, height, width);
  return resample(img, height, width, filter);
}

Image fit_image(const Image& img, int64_t height, int64_t width, Filter filter, Fit fit) {
  check_resize_args(img, height, width);
  if (fit == Fit::stretch || (img.height == height && img.width == width))
    return resample(img, height, width, filter);
  // The side whose scale is larger fits exactly; the other is truncated as torchvision's
  // Resize computes its long side, and never below the target.
  int64_t rh = height, rw = width;
  if (height * img.width >= width * img.height)
    rw = std::max(width, img.width * height / img.height);
  else
    rh = std::max(height, img.height * width / img.width);
  // CenterCrop's offsets: round((size - crop) / 2), halves to even. Only the crop is
  // computed.
  const auto top = static_cast<int64_t>(std::nearbyint(static_cast<double>(rh - height) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint(static_cast<double>(rw - width) / 2.0));
  return resample_window(img, rh, rw, {top, left, height, width}, filter);
}

std::pair<int64_t, int64_t> emu3_target_size(int64_t height, int64_t width, int64_t factor,
                                             int64_t min_area, int64_t max_area) {
  ZT_CHECK(height >= 1 && width >= 1 && factor >= 1, "emu3_target_size: bad arguments ", height,
           "x", width, " factor ", factor);
  auto round_to = [&](double v) {  // Python's round(): halves to even
    return std::max<int64_t>(factor, static_cast<int64_t>(std::nearbyint(v / factor)) * factor);
  };
  int64_t h = round_to(static_cast<double>(height)), w = round_to(static_cast<double>(width));
  const double area = static_cast<double>(height) * static_cast<double>(width);
  if (max_area > 0 && h * w > max_area) {
    const double beta = std::sqrt(area / static_cast<double>(max_area));
    h = std::max<int64_t>(factor,
                          static_cast<int64_t>(std::floor(height / beta / factor)) * factor);
    w = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(width / beta / factor)) * factor);
  } else if (min_area > 0 && h * w < min_area) {
    const double beta = std::sqrt(static_cast<double>(min_area) / area);
    h = static_cast<int64_t>(std::ceil(height * beta / factor)) * factor;
    w = static_cast<int64_t>(std::ceil(width * beta / factor)) * factor;
  }
  return {h, w};
}

Tensor image_to_tensor(const Image& img) {
  const int64_t H = img.height, W = img.width, plane = H * W;
  Tensor t = empty({3, H, W}, DType::f32);
  float* out = t.data<float>();
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c)
      out[c * plane + i] =
          static_cast<float>(img.rgb[static_cast<size_t>(i * 3 + c)]) / 127.5f - 1.0f;
  return t;
}

Image tensor_to_image(const Tensor& chw) {
  ZT_CHECK(chw.dim() == 3 && chw.size(0) == 3, "tensor_to_image: expected (3, H, W), got ",
           shape_str(chw.sizes()));
  const Tensor t = chw.to(Device::cpu()).to(DType::f32).contiguous();
  Image img;
  img.height = t.size(1);
  img.width = t.size(2);
  const int64_t plane = img.height * img.width;
  img.rgb.resize(static_cast<size_t>(plane * 3));
  const float* p = t.data<float>();
  for (int64_t i = 0; i < plane; ++i)
    for (int64_t c = 0; c < 3; ++c) {
      const float v = (p[c * plane + i] * 0.5f + 0.5f) * 255.0f;
      img.rgb[static_cast<size_t>(i * 3 + c)] =
          static_cast<uint8_t>(std::clamp(std::lround(std::isnan(v) ? 0.0f : v), 0L, 255L));
    }
  return img;
}

Image make_grid(const std::vector<Tensor>& clips, int64_t pad) {
  ZT_CHECK(!clips.empty(), "make_grid: no clips");
  std::vector<Tensor> cs;
  for (const Tensor& c : clips) {
    Tensor t = c.to(Device::cpu()).to(DType::f32).contiguous();
    if (t.dim() == 4) t = t.unsqueeze(1);
    ZT_CHECK(t.dim() == 5 && t.size(2) == 3, "make_grid: expected (B, T, 3, H, W) clips, got ",
             shape_str(c.sizes()));
    ZT_CHECK(cs.empty() || t.sizes() == cs[0].sizes(),
             "make_grid: clips differ in shape: ", shape_str(t.sizes()), " vs ",
             shape_str(cs[0].sizes()));
    cs.push_back(t.contiguous());
  }
  const int64_t B = cs[0].size(0), T = cs[0].size(1), H = cs[0].size(3), W = cs[0].size(4);
  const int64_t rows = B * static_cast<int64_t>(cs.size());
  Image g;
  g.height = rows * H + (rows + 1) * pad;
  g.width = T * W + (T + 1) * pad;
  g.rgb.assign(static_cast<size_t>(g.height * g.width * 3), 128);
  const int64_t plane = H * W;
  for (int64_t b = 0; b < B; ++b)
    for (size_t k = 0; k < cs.size(); ++k) {
      const int64_t row = b * static_cast<int64_t>(cs.size()) + static_cast<int64_t>(k);
      for (int64_t t = 0; t < T; ++t) {
        const float* f = cs[k].data<float>() + (b * T + t) * 3 * plane;
        const int64_t oy = pad + row * (H + pad), ox = pad + t * (W + pad);
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x)
            for (int64_t c = 0; c < 3; ++c) {
              const float v = (f[c * plane + y * W + x] * 0.5f + 0.5f) * 255.0f;
              g.rgb[static_cast<size_t>(((oy + y) * g.width + ox + x) * 3 + c)] =
                  static_cast<uint8_t>(std::clamp(std::lround(std::isnan(v) ? 0.0f : v), 0L, 255L));
            }
      }
    }
  return g;
}

}  // namespace zt::data

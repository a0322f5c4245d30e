// The one translation unit that compiles the stb image libraries (decoder and
// encoder). Built with warnings off (see data/CMakeLists.txt): third-party code.
//
// Only the formats zt reads are compiled (PNG, JPEG, BMP, TGA): a file of another format
// under an image's name is unreadable, not decoded by a less-used decoder. Every decoder
// allocation is held to the calling thread's cap (data/stb_alloc.h), which the image
// loader sets from the header's size before decoding: a PNG whose compressed data
// inflates far past what its header says (stb's inflate doubles its buffer up to 2 GiB
// whatever the header says) fails as out of memory instead.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "data/stb_alloc.h"

namespace {
thread_local std::size_t g_cap = SIZE_MAX;
void* capped_malloc(std::size_t n) {
  return n > g_cap ? nullptr : std::malloc(n);
}
void* capped_realloc(void* p, std::size_t n) {
  return n > g_cap ? nullptr : std::realloc(p, n);  // p stays valid when refused
}
}  // namespace

namespace zt::data {
StbAllocCap::StbAllocCap(std::size_t bytes) : previous_(g_cap) {
  g_cap = bytes;
}
StbAllocCap::~StbAllocCap() {
  g_cap = previous_;
}
}  // namespace zt::data

#define STBI_MALLOC(n) capped_malloc(n)
#define STBI_REALLOC(p, n) capped_realloc(p, n)
#define STBI_FREE(p) std::free(p)
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_ONLY_TGA
#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#include "stb_image.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include "stb_image_write.h"

// The one translation unit that compiles the stb image libraries (decoder and
// encoder). Built with warnings off (see data/CMakeLists.txt): third-party code.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#include "stb_image.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include "stb_image_write.h"

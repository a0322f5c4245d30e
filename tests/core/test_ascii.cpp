// ascii_lower (core/ascii.h): what the apps compare file extensions and config names by.
#include <gtest/gtest.h>

#include "core/ascii.h"

TEST(AsciiLower, LowersAsciiLettersAndKeepsEveryOtherByte) {
  EXPECT_EQ(zt::ascii_lower(".JPG"), ".jpg");
  EXPECT_EQ(zt::ascii_lower("AdamW_2"), "adamw_2");
  // UTF-8 (É is C3 89) and Latin-1 bytes pass through, whatever the locale.
  EXPECT_EQ(zt::ascii_lower("\xC3\x89T\xC9"), "\xC3\x89t\xC9");
  EXPECT_EQ(zt::ascii_lower("@[`{"), "@[`{");  // the neighbours of 'A'-'Z' and 'a'-'z'
}

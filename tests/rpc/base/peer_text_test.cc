// A peer's text as errors and spans echo it: bounded, escaped, plain text
// unchanged.
#include "rpc/base/peer_text.h"

#include <string>

#include "gtest/gtest.h"

namespace ferry {
namespace {

TEST(PeerTextTest, PlainTextReadsAsItself) {
  EXPECT_EQ(EchoPeerText("nope"), "nope");
  EXPECT_EQ(EchoPeerText("ferry.rref_call"), "ferry.rref_call");
  EXPECT_EQ(EchoPeerText("naïve"), "naïve");
  EXPECT_EQ(EchoPeerText(""), "");
}

TEST(PeerTextTest, ControlBytesAndQuotesAreEscaped) {
  EXPECT_EQ(EchoPeerText("a\nb\"c\x1b"), "a\\nb\\\"c\\x1b");
}

TEST(PeerTextTest, LongTextIsCutAndSaysItsLength) {
  const std::string name(256 << 10, 'a');
  const std::string echoed = EchoPeerText(name);
  EXPECT_EQ(echoed, std::string(kEchoBytes, 'a') + "… (262144 bytes)");
  EXPECT_EQ(EchoPeerText("abcdef", 3), "abc… (6 bytes)");
}

TEST(PeerTextTest, NeverCutsInsideACharacter) {
  // "ï" is two bytes: a cut after its first byte backs off before it.
  EXPECT_EQ(EchoPeerText("naïve", 3), "na… (6 bytes)");
}

}  // namespace
}  // namespace ferry

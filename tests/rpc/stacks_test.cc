// rpc/stacks.h: every thread's stack, symbolized, with what it waits for.
#include "rpc/stacks.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A frame of its own name that stays on the stack until `release`.
__attribute__((noinline)) void ParkedInAKnownFunction(
    absl::Notification* parked, absl::Notification* release) {
  WaitNote note("the test's release");
  parked->Notify();
  release->WaitForNotificationWithTimeout(absl::Seconds(60));
  asm volatile("" ::: "memory");  // No tail call: this frame stays.
}

TEST(StacksTest, EveryThreadWithItsFramesAndWhatItWaitsFor) {
  absl::Notification parked, release;
  std::thread t(ParkedInAKnownFunction, &parked, &release);
  ASSERT_TRUE(parked.WaitForNotificationWithTimeout(absl::Seconds(30)));
  std::vector<ThreadStack> threads = CaptureStacks();
  release.Notify();
  t.join();
  ASSERT_GE(threads.size(), 2u);
  const ThreadStack* found = nullptr;
  for (const ThreadStack& s : threads) {
    EXPECT_TRUE(s.captured) << s.tid;
    for (const std::string& f : s.frames) {
      if (f.find("ParkedInAKnownFunction") != std::string::npos) found = &s;
    }
  }
  ASSERT_NE(found, nullptr) << "no thread shows the parked frame";
  EXPECT_EQ(found->waiting, "the test's release");
  // The capturing thread is there too, in CaptureStacks itself.
  bool self = false;
  for (const ThreadStack& s : threads) {
    for (const std::string& f : s.frames)
      self = self || f.find("CaptureStacks") != std::string::npos;
  }
  EXPECT_TRUE(self);
}

TEST(StacksTest, NotesNestAndEnd) {
  {
    WaitNote outer("outer");
    {
      WaitNote inner("inner");
      bool shown = false;
      for (const ThreadStack& s : CaptureStacks())
        shown = shown || s.waiting == "inner";
      EXPECT_TRUE(shown);
    }
    bool restored = false;
    for (const ThreadStack& s : CaptureStacks())
      restored = restored || s.waiting == "outer";
    EXPECT_TRUE(restored);
  }
  for (const ThreadStack& s : CaptureStacks()) EXPECT_EQ(s.waiting, "");
}

}  // namespace
}  // namespace ferry

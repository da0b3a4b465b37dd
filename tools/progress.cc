#include "tools/progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace ferry {

Progress::Progress()
    : enabled_(isatty(STDOUT_FILENO) && isatty(STDERR_FILENO)) {}

Progress::~Progress() { Clear(); }

void Progress::Update(absl::string_view text) {
  if (!enabled_) return;
  absl::MutexLock lock(&mu_);
  // \r: back to the line's start; ESC [K: erase what the last text left.
  std::fprintf(stderr, "\r\033[K%.*s", static_cast<int>(text.size()),
               text.data());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::Clear() {
  if (!enabled_) return;
  absl::MutexLock lock(&mu_);
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

Progress::Ticker::Ticker(Progress& progress, std::string label)
    : progress_(progress) {
  if (!progress_.enabled()) return;
  thread_ = std::thread([this, label = std::move(label)] {
    const absl::Time start = absl::Now();
    do {
      progress_.Update(absl::StrFormat(
          "%s... %.1f s", label, absl::ToDoubleSeconds(absl::Now() - start)));
    } while (!done_.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  });
}

Progress::Ticker::~Ticker() {
  done_.Notify();
  if (thread_.joinable()) thread_.join();
  progress_.Clear();
}

}  // namespace ferry

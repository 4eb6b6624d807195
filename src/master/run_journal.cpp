#include "master/run_journal.h"

#include <utility>

namespace ferry::master {

namespace {

// A journal entry carries at most this much text: kick reasons come from the network.
constexpr size_t kMaxEventText = 512;

}  // namespace

void RunJournal::event(uint64_t at_ms, const char* kind, std::optional<uint32_t> group,
                       std::optional<uint64_t> peer, std::string text) {
  if (text.size() > kMaxEventText) text.resize(kMaxEventText);
  if (events_.size() == kMaxEvents) events_.pop_front();
  events_.push_back({at_ms, kind, group, peer, std::move(text)});
}

void RunJournal::collective(const CollectiveRecord& record) {
  if (collectives_.size() == kMaxCollectives) collectives_.pop_front();
  collectives_.push_back(record);
}

}  // namespace ferry::master

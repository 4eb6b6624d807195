// One incoming connection of a ring link: reads chunk headers, asks the
// owning collective where each payload goes, reads it there, hands it over.
// One read at a time, so one staging buffer per lane suffices and the
// reduce of chunk i overlaps the kernel receiving chunk i+1.
//
// Threading: start()/close() from any thread; everything else on the
// stream's strand.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "net/stream.h"
#include "peer/op_directory.h"
#include "wire/chunk_header.h"

namespace ferry::peer {

class InLane : public std::enable_shared_from_this<InLane> {
 public:
  using OnError = std::function<void(const Status&)>;

  InLane(std::shared_ptr<net::Stream> stream, uint32_t lane, std::shared_ptr<OpDirectory> directory,
         OnError on_error);

  void start();
  void close();

 private:
  void read_header();
  void dispatch();  // find the header's collective, or park until it starts
  void read_payload();
  void fail(const Status& why);

  std::shared_ptr<net::Stream> stream_;
  const uint32_t lane_;
  std::shared_ptr<OpDirectory> directory_;
  OnError on_error_;
  // Only on the strand:
  bool closed_ = false;
  std::array<uint8_t, wire::kChunkHeaderBytes> header_bytes_{};
  wire::ChunkHeader header_;
  std::shared_ptr<ChunkConsumer> consumer_;
  uint8_t* destination_ = nullptr;
  std::vector<uint8_t> staging_;
};

}  // namespace ferry::peer

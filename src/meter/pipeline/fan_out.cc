#include "kwatt/meter/pipeline/fan_out.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "kwatt/core/own_cpu.h"
#include "src/meter/pipeline/bounded_queue.h"

namespace kwatt::meter {

struct ReportFanOut::Slot {
  std::string name;
  std::unique_ptr<ReportSink> sink;
  StatefulSink* stateful = nullptr;
  std::unique_ptr<BoundedQueue<std::shared_ptr<const IntervalReport>>> queue;
  std::thread thread;
  std::atomic<int64_t> dropped{0};
  Status first_error;  // the output thread's until joined
};

ReportFanOut::ReportFanOut(std::vector<MeterOutput> outputs, FanOutOptions options)
    : options_(std::move(options)) {
  for (auto& output : outputs) {
    auto slot = std::make_unique<Slot>();
    slot->name = std::move(output.name);
    slot->stateful = dynamic_cast<StatefulSink*>(output.sink.get());
    slot->sink = std::move(output.sink);
    slot->queue =
        std::make_unique<BoundedQueue<std::shared_ptr<const IntervalReport>>>(options_.queue);
    slots_.push_back(std::move(slot));
  }
}

ReportFanOut::~ReportFanOut() {
  if (begun_) (void)Finish();
}

Status ReportFanOut::Begin(const MeterHeader& header) {
  for (auto& slot : slots_) {
    KWATT_RETURN_IF_ERROR(slot->sink->Begin(header).WithContext("output " + slot->name));
  }
  begun_ = true;
  for (auto& slot : slots_) {
    Slot* s = slot.get();
    s->thread = std::thread([this, s] {
      OwnCpuScope own;  // the meter's work, never a target's
      Loop(s);
    });
  }
  return Status::OK();
}

void ReportFanOut::Loop(Slot* slot) {
  while (true) {
    auto item = slot->queue->Pop(std::chrono::milliseconds(500));
    if (!item) {
      if (slot->queue->Drained()) break;
      continue;
    }
    Status written = slot->sink->Write(**item);
    if (!written.ok()) {
      slot->dropped.fetch_add(1);
      if (slot->first_error.ok()) slot->first_error = written;
      if (options_.log) {
        options_.log("output " + slot->name, "output " + slot->name + ": " + written.message());
      }
    }
  }
}

Status ReportFanOut::Write(const IntervalReport& report) {
  Push(std::make_shared<const IntervalReport>(report));
  return Status::OK();
}

void ReportFanOut::Push(std::shared_ptr<const IntervalReport> report) {
  for (auto& slot : slots_) {
    std::shared_ptr<const IntervalReport> copy = report;
    const bool taken = options_.wait_when_full ? slot->queue->PushWhenRoom(std::move(copy))
                                               : slot->queue->TryPush(std::move(copy));
    if (taken) continue;
    slot->dropped.fetch_add(1);
    if (options_.log) {
      options_.log("queue " + slot->name,
                   "output " + slot->name + " is not keeping up: reports dropped for it (its " +
                       "queue of " + std::to_string(options_.queue) + " is full)");
    }
  }
}

void ReportFanOut::Drop(int64_t n) {
  for (auto& slot : slots_) slot->dropped.fetch_add(n);
}

Status ReportFanOut::Finish() {
  if (finished_ || !begun_) return finish_status_;
  finished_ = true;
  for (auto& slot : slots_) slot->queue->Close();
  // Every output that failed is named (its first write error, or its end's), not the first.
  Status status;
  std::string failures;
  for (auto& slot : slots_) {
    slot->thread.join();
    Status finished = slot->sink->Finish().WithContext("output " + slot->name);
    Status failed =
        !finished.ok() ? finished : slot->first_error.WithContext("output " + slot->name);
    if (failed.ok()) continue;
    if (status.ok()) status = failed;
    failures += (failures.empty() ? "" : "; ") + failed.message();
  }
  if (failures != status.message()) status = Status::IOError(failures);  // several failed
  finish_status_ = status;
  return status;
}

void ReportFanOut::Abandon() {
  for (auto& slot : slots_) slot->sink->Abandon();
}

int64_t ReportFanOut::PendingRows() const {
  int64_t rows = 0;
  for (const auto& slot : slots_) rows += slot->sink->PendingRows();
  return rows;
}

std::vector<std::pair<std::string, int64_t>> ReportFanOut::PendingRowsByOutput() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& slot : slots_) out.emplace_back(slot->name, slot->sink->PendingRows());
  return out;
}

std::vector<std::pair<std::string, int64_t>> ReportFanOut::Dropped() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& slot : slots_) out.emplace_back(slot->name, slot->dropped.load());
  return out;
}

std::map<std::string, StatefulSink*> ReportFanOut::StatefulOutputs() const {
  std::map<std::string, StatefulSink*> out;
  for (const auto& slot : slots_) {
    if (slot->stateful) out.emplace(slot->name, slot->stateful);
  }
  return out;
}

}  // namespace kwatt::meter

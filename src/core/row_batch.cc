#include "kwatt/core/row_batch.h"

namespace kwatt {

uint32_t StringInterner::Intern(std::string_view text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  const std::string& stored = storage_.emplace_back(text);
  uint32_t id = uint32_t(strings_.size());
  strings_.push_back(&stored);
  ids_.emplace(std::string_view(stored), id);
  return id;
}

void RowBatch::Clear() {
  time.clear();
  utc_offset.clear();
  device.clear();
  metric.clear();
  value.clear();
  labels.clear();
  raw.clear();
  raw_end.clear();
}

void RowBatch::AppendRow(const RowBatch& other, size_t i) {
  time.push_back(other.time[i]);
  utc_offset.push_back(other.utc_offset[i]);
  device.push_back(other.device[i]);
  metric.push_back(other.metric[i]);
  value.push_back(other.value[i]);
  labels.push_back(other.labels[i]);
  raw.append(other.RawRow(i));
  raw_end.push_back(uint32_t(raw.size()));
}

}  // namespace kwatt

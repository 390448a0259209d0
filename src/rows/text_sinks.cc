#include "kwatt/rows/text_sinks.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "kwatt/core/json_text.h"
#include "kwatt/core/text.h"
#include "kwatt/core/time.h"

namespace kwatt::rows {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

}  // namespace

Status TextSink::Flush() {
  if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
    return Status::IOError("cannot write to " + name_ + ": " + std::strerror(errno));
  }
  buffer_.clear();
  if (std::fflush(out_) != 0) {
    return Status::IOError("cannot write to " + name_ + ": " + std::strerror(errno));
  }
  return Status::OK();
}

Status TextSink::MaybeFlush() {
  if (buffer_.size() < kBufferBytes) return Status::OK();
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
    return Status::IOError("cannot write to " + name_ + ": " + std::strerror(errno));
  }
  buffer_.clear();
  return Status::OK();
}

Status JsonlSink::Write(std::string_view, const RowBatch& batch, const StringInterner& interner) {
  for (size_t i = 0; i < batch.size(); ++i) {
    AppendRowText(&buffer_, batch, i, interner);
    buffer_.push_back('\n');
    if ((i & 1023) == 1023) KWATT_RETURN_IF_ERROR(MaybeFlush());
  }
  rows_ += int64_t(batch.size());
  return MaybeFlush();
}

Status CsvSink::Write(std::string_view site, const RowBatch& batch,
                      const StringInterner& interner) {
  if (!header_written_) {
    buffer_ += "timestamp,site,node,device_id,metric_id,value,labels\n";
    header_written_ = true;
  }
  char text[kMaxTimestampLength];
  char number[kMaxNumberLength];
  for (size_t i = 0; i < batch.size(); ++i) {
    buffer_.append(text, FormatTimestamp(batch.time[i], batch.utc_offset[i], text));
    buffer_.push_back(',');
    AppendCsvField(&buffer_, site);
    buffer_.push_back(',');
    std::string_view device = interner.Get(batch.device[i]);
    AppendCsvField(&buffer_, std::string(device) + "." + std::string(site) + ".grid5000.fr");
    buffer_.push_back(',');
    AppendCsvField(&buffer_, device);
    buffer_.push_back(',');
    AppendCsvField(&buffer_, interner.Get(batch.metric[i]));
    buffer_.push_back(',');
    double value = batch.value[i];
    if (std::isnan(value)) {
      buffer_ += "NaN";
    } else {
      size_t n = FormatJsonNumber(value, number);
      if (number[0] == '"') {
        buffer_.append(number + 1, n - 2);  // "Infinity"
      } else {
        buffer_.append(number, n);
      }
    }
    buffer_.push_back(',');
    AppendCsvField(&buffer_, interner.Get(batch.labels[i]));
    buffer_.push_back('\n');
    if ((i & 1023) == 1023) KWATT_RETURN_IF_ERROR(MaybeFlush());
  }
  rows_ += int64_t(batch.size());
  return MaybeFlush();
}

}  // namespace kwatt::rows

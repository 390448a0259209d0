// Sinks that write rows as text: JSON Lines (each row exactly as the API sent it) or CSV: what
// `kwatt fetch -o`, `kwatt cat`, `kwatt export`, `kwatt store cat` and the dashboard's downloads
// write.
//
// A sink writes to a FILE* it does not own, through its own buffer; Flush() must be called at the
// end (and reports any write error, e.g. a full disk). Not thread-safe.
#ifndef KWATT_ROWS_TEXT_SINKS_H_
#define KWATT_ROWS_TEXT_SINKS_H_

#include <cstdio>
#include <string>

#include "kwatt/core/row_sink.h"

namespace kwatt::rows {

class TextSink : public RowSink {
 public:
  // `name` names the destination in error messages ("stdout", a path).
  TextSink(FILE* out, std::string name) : out_(out), name_(std::move(name)) {}
  Status Flush();
  int64_t rows() const { return rows_; }

 protected:
  Status MaybeFlush();
  FILE* out_;
  std::string name_;
  std::string buffer_;
  int64_t rows_ = 0;
};

// One line per row: the row's exact text, or, for rows without it (from a store), the row as
// Kwollect renders it (AppendRowText).
class JsonlSink : public TextSink {
 public:
  using TextSink::TextSink;
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;
};

// RFC 4180 CSV with a header: timestamp,site,node,device_id,metric_id,value,labels. timestamp is
// Kwollect's text, node the FQDN of the row's device, value as the API wrote it (NaN for NaN),
// labels the compact JSON object.
class CsvSink : public TextSink {
 public:
  using TextSink::TextSink;
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;

 private:
  bool header_written_ = false;
};

}  // namespace kwatt::rows

#endif  // KWATT_ROWS_TEXT_SINKS_H_

// A small complete archive written by the real ArchiveWriter, for the tests of what reads archives
// (rows, report).
#ifndef KWATT_SRC_TESTING_SMALL_ARCHIVE_H_
#define KWATT_SRC_TESTING_SMALL_ARCHIVE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kwatt/archive/format.h"
#include "kwatt/archive/writer.h"
#include "kwatt/core/row_parser.h"
#include "kwatt/core/time.h"

namespace kwatt::testing_archive {

// A complete archive of `uids` (lyon) over [from, to) holding `rows`.
inline void WriteArchive(const std::string& dir, const std::vector<std::string>& uids,
                         UnixNanos from, UnixNanos to, const std::string& rows,
                         bool summary = false) {
  archive::BackupQuery query;
  query.api = std::string(archive::kRecordingApi);
  for (const std::string& uid : uids) query.nodes.push_back(uid + ".lyon.grid5000.fr");
  query.start = from;
  query.end = to;
  query.summary = summary;
  RowsReport resolved;
  for (const std::string& uid : uids) resolved.nodes.push_back(NodeName{uid, "lyon"});
  resolved.start = from;
  resolved.end = to;
  resolved.summary = summary;
  Result<std::unique_ptr<archive::ArchiveWriter>> writer =
      archive::ArchiveWriter::Open(dir, query, "test");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Begin(resolved).ok());
  StringInterner interner;
  RowBatch batch;
  internal::RowStreamParser parser(&interner, internal::Framing::kJsonLines);
  ASSERT_TRUE(parser.Feed(rows, &batch).ok());
  ASSERT_TRUE(parser.Finish().ok());
  ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
  Status finished = (*writer)->Finish(resolved);
  ASSERT_TRUE(finished.ok()) << finished.ToString();
}

}  // namespace kwatt::testing_archive

#endif  // KWATT_SRC_TESTING_SMALL_ARCHIVE_H_

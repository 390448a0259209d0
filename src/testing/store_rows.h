// Rows as the store's tests see them (every field by value), and the helpers every engine's
// tests share: batches from rows, rows from queries, what a query must give.
#ifndef KWATT_SRC_TESTING_STORE_ROWS_H_
#define KWATT_SRC_TESTING_STORE_ROWS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/store/store.h"

namespace kwatt::store::testing {

// A row as the tests see it: every field by value.
struct Row {
  UnixNanos time = 0;
  int32_t utc_offset = 7200;
  std::string device, metric;
  double value = 0;
  std::string labels = "{}";

  auto Key() const { return std::tie(time, utc_offset, device, metric, labels); }
  bool operator==(const Row& o) const {
    return Key() == o.Key() && std::bit_cast<uint64_t>(value) == std::bit_cast<uint64_t>(o.value);
  }
};

inline std::ostream& operator<<(std::ostream& out, const Row& r) {
  return out << r.device << " " << r.metric << " " << r.labels << " @" << r.time << "+"
             << r.utc_offset << " = " << r.value;
}

inline RowBatch ToBatch(const std::vector<Row>& rows, StringInterner* interner) {
  RowBatch batch;
  for (const Row& r : rows) {
    batch.time.push_back(r.time);
    batch.utc_offset.push_back(r.utc_offset);
    batch.device.push_back(interner->Intern(r.device));
    batch.metric.push_back(interner->Intern(r.metric));
    batch.value.push_back(r.value);
    batch.labels.push_back(interner->Intern(r.labels));
  }
  return batch;
}

inline void Append(Store& store, const std::vector<Row>& rows) {
  StringInterner interner;
  RowBatch batch = ToBatch(rows, &interner);
  Status status = store.Append(batch, interner);
  ASSERT_TRUE(status.ok()) << status.ToString();
}

inline std::vector<Row> QueryRows(Store& store, StoreQuery query, size_t* batches = nullptr) {
  std::vector<Row> rows;
  size_t count = 0;
  Status status = store.Query(query, [&](const RowBatch& batch, const StringInterner& interner) {
    ++count;
    EXPECT_LE(batch.size(), query.batch_rows);
    EXPECT_TRUE(batch.raw.empty());
    for (size_t i = 0; i < batch.size(); ++i) {
      rows.push_back(Row{batch.time[i], batch.utc_offset[i],
                         std::string(interner.Get(batch.device[i])),
                         std::string(interner.Get(batch.metric[i])), batch.value[i],
                         std::string(interner.Get(batch.labels[i]))});
    }
    return Status::OK();
  });
  EXPECT_TRUE(status.ok()) << status.ToString();
  if (batches) *batches = count;
  return rows;
}

inline std::vector<Row> QueryAll(Store& store) {
  StoreQuery query;
  query.start = std::numeric_limits<int64_t>::min();
  query.end = std::numeric_limits<int64_t>::max();
  return QueryRows(store, query);
}

// Both engines keep the same jobs (kwatt jobs list prints one a line): a type, node or user with
// a newline is refused, naming it, and nothing is kept. `at`: an instant for the jobs' start.
inline void ExpectJobsWithControlCharactersRefused(Store& store, UnixNanos at) {
  jobs::Job job{"lyon", 0, "alice", {"nova-1"}, at, std::nullopt, {"monitor\nx"}};
  Result<int64_t> added = store.AddJob(job, /*next_id=*/true);
  EXPECT_EQ(added.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(added.status().message(),
            "the job to add on lyon: its type \"monitor\\nx\" holds a control character: give "
            "each one on its own, without newlines or tabs");
  job.types = {};
  job.user = "bob\nsmith";
  job.uid = 4;
  Status put = store.PutJob(job);
  EXPECT_NE(put.message().find("job lyon:4: its user \"bob\\nsmith\""), std::string::npos)
      << put.ToString();
  EXPECT_TRUE(store.Jobs("lyon", INT64_MIN, INT64_MAX)->empty());
}

// Both engines move an import's mark with its rows (kwatt import resumes from it): a batch and
// the mark's move are kept together, a move from a mark that is not there (another import of
// the same archive moved it) keeps neither. `at`: an instant for the rows.
inline void ExpectImportMarksMoveWithTheirRows(Store& store, UnixNanos at) {
  const std::string key = "archive made 2025-04-18T12:00:00Z";
  Result<std::optional<ImportMark>> none = store.GetImportMark(key);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  StringInterner interner;
  std::vector<Row> rows = {{at, 7200, "nova-1", "m", 1}, {at + 1000, 7200, "nova-1", "m", 2}};
  RowBatch batch = ToBatch(rows, &interner);
  Status moved = store.AppendImported(batch, interner, key, std::nullopt, {2, false});
  ASSERT_TRUE(moved.ok()) << moved.ToString();
  EXPECT_EQ(*store.GetImportMark(key), std::optional(ImportMark{2, false}));
  // A second import that read no mark (or an older one): refused, nothing kept.
  for (std::optional<ImportMark> stale :
       {std::optional<ImportMark>(), std::optional(ImportMark{1})}) {
    Status refused = store.AppendImported(batch, interner, key, stale, {4, false});
    EXPECT_EQ(refused.code(), Status::Code::kUnavailable) << refused.ToString();
    EXPECT_NE(refused.message().find("another import of this archive (" + key +
                                     ") is writing to the store: its mark says 2 rows"),
              std::string::npos)
        << refused.message();
  }
  EXPECT_EQ(QueryAll(store), rows);
  EXPECT_EQ(*store.GetImportMark(key), std::optional(ImportMark{2, false}));
  // The mark alone, to done; other keys are other imports.
  ASSERT_TRUE(store.AppendImported({}, interner, key, ImportMark{2, false}, {2, true}).ok());
  EXPECT_EQ(*store.GetImportMark(key), std::optional(ImportMark{2, true}));
  EXPECT_FALSE(store.GetImportMark(key + " ")->has_value());
  ASSERT_TRUE(store.Flush().ok());
  EXPECT_EQ(QueryAll(store), rows);
}

// What a query must give: the rows in the window, by device, time, metric, labels, then in the
// order they were appended (a stable sort of the appended rows).
inline std::vector<Row> Expected(std::vector<Row> rows, UnixNanos start, UnixNanos end,
                                 const std::vector<std::string>& devices = {},
                                 const std::vector<std::string>& metrics = {}) {
  std::erase_if(rows, [&](const Row& r) {
    return r.time < start || r.time >= end ||
           (!devices.empty() &&
            std::find(devices.begin(), devices.end(), r.device) == devices.end()) ||
           (!metrics.empty() &&
            std::find(metrics.begin(), metrics.end(), r.metric) == metrics.end());
  });
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tie(a.device, a.time, a.metric, a.labels) <
           std::tie(b.device, b.time, b.metric, b.labels);
  });
  return rows;
}

inline void ExpectSound(Store& store) {
  auto report = store.Check();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  for (const auto& problem : report->problems) ADD_FAILURE() << problem;
}

}  // namespace kwatt::store::testing

#endif  // KWATT_SRC_TESTING_STORE_ROWS_H_

// The embedded store, against real SQLite files in temporary directories, and a real kill -9.
#include "kwatt/store/sqlite_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kwatt/core/null_value.h"
#include "kwatt/store/writer_lock.h"
#include "src/testing/archive_files.h"
#include "src/testing/manual_clock.h"
#include "src/testing/store_rows.h"
#include "src/testing/temp_dir.h"

namespace kwatt::store::sqlite_store_test {
namespace {

namespace fs = std::filesystem;
using archive::test_files::ReadFile;
using archive::test_files::WriteFile;
using kwatt::testing::TempDir;

constexpr UnixNanos kT0 = 1'745'000'000 * kNanosPerSecond;  // 2025-04-18T18:13:20Z

using testing::Append;
using testing::Expected;
using testing::ExpectImportMarksMoveWithTheirRows;
using testing::ExpectJobsWithControlCharactersRefused;
using testing::ExpectSound;
using testing::QueryAll;
using testing::QueryRows;
using testing::Row;
using testing::ToBatch;

std::unique_ptr<Store> Open(const fs::path& path, SqliteStoreOptions options = {}) {
  auto store = OpenSqliteStore(path.string(), options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

class StoreTest : public ::testing::TestWithParam<size_t> {
 protected:
  // Small heads, so that blocks, heads and their edges all show (the parameter: head_rows).
  SqliteStoreOptions Options() {
    SqliteStoreOptions options;
    options.head_rows = GetParam();
    options.clock = clock_;
    return options;
  }
  fs::path Path() const { return temp_.root() / "store.db"; }

  TempDir temp_{"kwatt_store_test"};
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(0, kT0);
};

TEST_P(StoreTest, RoundTripIsExact) {
  auto store = Open(Path(), Options());
  ASSERT_TRUE(store);
  const double kValues[] = {0.0,
                            -0.0,
                            std::numeric_limits<double>::quiet_NaN(),
                            NullValue(),
                            std::bit_cast<double>(uint64_t(0xfff8000000000abcULL)),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::denorm_min(),
                            -1e-300,
                            1e300,
                            0.1,
                            151.3,
                            1.0 / 3.0};
  std::vector<Row> rows;
  for (size_t i = 0; i < std::size(kValues); ++i) {
    rows.push_back(Row{kT0 + int64_t(i) * 20 * kNanosPerMilli + 1000, i % 3 ? 7200 : 3600, "nova-1",
                       "wattmetre_power_watt", kValues[i],
                       R"({"_device_orig":["wattmetre1-port6"],"x":"é\"\\"})"});
  }
  Append(*store, rows);
  EXPECT_EQ(QueryAll(*store), rows);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(QueryAll(*store), rows);
  ExpectSound(*store);
  store.reset();
  store = Open(Path(), Options());
  EXPECT_EQ(QueryAll(*store), rows);
}

TEST_P(StoreTest, FinerThanMicrosecondIsRefusedAndNothingIsAppended) {
  auto store = Open(Path(), Options());
  std::vector<Row> rows = {{kT0, 7200, "nova-1", "m", 1.0}, {kT0 + 1, 7200, "nova-1", "m", 2.0}};
  StringInterner interner;
  Status status = store->Append(ToBatch(rows, &interner), interner);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  // Rows are counted from 1, as a user counts them (the second one is wrong).
  EXPECT_NE(status.message().find("row 2 (nova-1 m"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("microsecond"), std::string::npos) << status.message();
  EXPECT_TRUE(QueryAll(*store).empty());
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->rows, 0);
}

TEST_P(StoreTest, OrderByDeviceTimeMetricLabelsThenAppendOrder) {
  auto store = Open(Path(), Options());
  std::vector<Row> rows;
  // Two devices, metrics given out of name order, equal instants, duplicates of one series.
  for (int i = 0; i < 40; ++i) {
    UnixNanos t = kT0 + (i / 4) * kNanosPerSecond;
    rows.push_back({t, 7200, i % 2 ? "nova-2" : "nova-1", i % 3 ? "z_metric" : "a_metric", i * 1.5,
                    i % 5 ? "{}" : R"({"a":1})"});
    rows.push_back({t, 7200, "nova-1", "z_metric", -i * 1.0, "{}"});  // same series, same time
  }
  Append(*store, rows);
  StoreQuery query;
  query.start = kT0;
  query.end = kT0 + 3600 * kNanosPerSecond;
  EXPECT_EQ(QueryRows(*store, query), Expected(rows, query.start, query.end));
  query.devices = {"nova-2", "nova-1", "nova-2", "nowhere"};
  query.metrics = {"z_metric"};
  EXPECT_EQ(QueryRows(*store, query), Expected(rows, query.start, query.end, {}, {"z_metric"}));
  query.devices = {"nova-2"};
  query.metrics = {};
  EXPECT_EQ(QueryRows(*store, query), Expected(rows, query.start, query.end, {"nova-2"}));
}

TEST_P(StoreTest, WindowsAtBlockEdges) {
  auto store = Open(Path(), Options());
  std::vector<Row> rows;
  for (int i = 0; i < 97; ++i) rows.push_back({kT0 + i * kNanosPerSecond, 7200, "d", "m", i * 0.5});
  Append(*store, rows);
  ASSERT_TRUE(store->Flush().ok());
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->blocks, int64_t(rows.size() / GetParam()));
  EXPECT_EQ(info->head_rows, int64_t(rows.size() % GetParam()));
  for (int a = -1; a <= 98; a += 1) {
    for (int b : {a, a + 1, a + 2, a + 7, a + 8, a + 9, a + 50, 200}) {
      StoreQuery query;
      query.start = kT0 + a * kNanosPerSecond;
      query.end = kT0 + b * kNanosPerSecond;
      query.batch_rows = 3;
      ASSERT_EQ(QueryRows(*store, query), Expected(rows, query.start, query.end))
          << "[" << a << ", " << b << ")";
    }
  }
  // Bounds between microseconds: [start, end) on nanoseconds.
  StoreQuery query;
  query.start = kT0 + 5 * kNanosPerSecond - 1;
  query.end = kT0 + 7 * kNanosPerSecond + 1;
  EXPECT_EQ(QueryRows(*store, query), Expected(rows, query.start, query.end));
  query.start = kT0 + 5 * kNanosPerSecond + 1;
  EXPECT_EQ(QueryRows(*store, query), Expected(rows, query.start, query.end));
}

TEST_P(StoreTest, LateRowsComeInTimeOrder) {
  auto store = Open(Path(), Options());
  std::vector<Row> all;
  std::vector<Row> rows;
  for (int i = 0; i < 60; ++i) rows.push_back({kT0 + i * kNanosPerSecond, 7200, "d", "m", i * 1.0});
  Append(*store, rows);
  all = rows;
  ASSERT_TRUE(store->Flush().ok());
  // Late rows: inside sealed blocks, equal to sealed instants, and far in the past.
  std::vector<Row> late = {{kT0 + 5 * kNanosPerSecond + 500'000, 7200, "d", "m", 1000},
                           {kT0 + 7 * kNanosPerSecond, 7200, "d", "m", 1001},
                           {kT0 - 86400 * kNanosPerSecond, 7200, "d", "m", 1002},
                           {kT0 + 30 * kNanosPerSecond, 3600, "d", "m", 1003},
                           {kT0 + 59 * kNanosPerSecond, 7200, "d", "m", 1004}};
  for (int round = 0; round < 3; ++round) {
    Append(*store, late);
    all.insert(all.end(), late.begin(), late.end());
    ASSERT_EQ(QueryAll(*store), Expected(all, INT64_MIN, INT64_MAX));
    StoreQuery query;
    query.start = kT0 + 5 * kNanosPerSecond;
    query.end = kT0 + 31 * kNanosPerSecond;
    ASSERT_EQ(QueryRows(*store, query), Expected(all, query.start, query.end));
  }
  ASSERT_TRUE(store->Flush().ok());
  ExpectSound(*store);
}

TEST_P(StoreTest, ManySeriesInAnyOrder) {
  auto store = Open(Path(), Options());
  std::mt19937 random(11);
  std::vector<Row> all;
  const char* kMetrics[] = {"wattmetre_power_watt", "bmc_node_power_watt", "prom_cpu", "a"};
  for (int round = 0; round < 8; ++round) {
    std::vector<Row> rows;
    for (int i = 0; i < 400; ++i) {
      rows.push_back({kT0 + int64_t(random() % 600) * kNanosPerSecond / 10, 7200,
                      "node-" + std::to_string(random() % 30), kMetrics[random() % 4],
                      double(random() % 2000) / 10, random() % 7 ? "{}" : R"({"k":"v"})"});
    }
    Append(*store, rows);
    all.insert(all.end(), rows.begin(), rows.end());
    if (round % 3 == 0) {
      ASSERT_TRUE(store->Flush().ok());
    }
  }
  EXPECT_EQ(QueryAll(*store), Expected(all, INT64_MIN, INT64_MAX));
  StoreQuery query;
  query.devices = {"node-3", "node-17", "node-29"};
  query.metrics = {"prom_cpu", "a"};
  query.start = kT0 + 10 * kNanosPerSecond;
  query.end = kT0 + 40 * kNanosPerSecond;
  EXPECT_EQ(QueryRows(*store, query),
            Expected(all, query.start, query.end, query.devices, query.metrics));
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->rows, int64_t(all.size()));
  EXPECT_LE(info->series, 30 * 4 * 2);
  ExpectSound(*store);
}

TEST_P(StoreTest, EmptyStore) {
  auto store = Open(Path(), Options());
  size_t batches = 0;
  StoreQuery query;
  query.end = kT0;
  EXPECT_TRUE(QueryRows(*store, query, &batches).empty());
  EXPECT_EQ(batches, 0u);
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->series, 0);
  EXPECT_EQ(info->rows, 0);
  EXPECT_EQ(info->first, 0);
  EXPECT_GT(info->bytes, 0);
  ExpectSound(*store);
}

TEST_P(StoreTest, ReopenKeepsRowsAndContinues) {
  std::vector<Row> rows;
  for (int i = 0; i < 50; ++i) rows.push_back({kT0 + i * kNanosPerSecond, 7200, "d", "m", i * 1.0});
  {
    auto store = Open(Path(), Options());
    Append(*store, rows);
    // No Flush: closing the store flushes.
  }
  auto store = Open(Path(), Options());
  EXPECT_EQ(QueryAll(*store), rows);
  std::vector<Row> more;
  for (int i = 50; i < 80; ++i)
    more.push_back({kT0 + i * kNanosPerSecond, 7200, "d", "m", i * 1.0});
  Append(*store, more);
  rows.insert(rows.end(), more.begin(), more.end());
  EXPECT_EQ(QueryAll(*store), rows);
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->series, 1);
  EXPECT_EQ(info->rows, 80);
  EXPECT_EQ(info->first, kT0);
  EXPECT_EQ(info->last, kT0 + 79 * kNanosPerSecond);
  ExpectSound(*store);
}

TEST_P(StoreTest, SealPutsEveryHeadIntoBlocksAndKeepsTheRows) {
  // Rows of several series, a late one and two of one instant, so that the sealed blocks must
  // keep time order and the instant's append order.
  std::vector<Row> rows;
  for (int i = 0; i < 30; ++i) {
    rows.push_back({kT0 + i * kNanosPerSecond, 7200, "d", "m", i * 1.0});
    if (i % 3 == 0) rows.push_back({kT0 + i * kNanosPerSecond, 7200, "d", "n", -i * 1.0});
  }
  rows.push_back({kT0 + 5 * kNanosPerSecond, 7200, "d", "m", 99.0});  // late, ties with i = 5
  auto store = Open(Path(), Options());
  Append(*store, rows);
  std::vector<Row> before = QueryAll(*store);
  ASSERT_TRUE(store->Seal().ok());
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->head_rows, 0);
  EXPECT_EQ(info->rows, int64_t(rows.size()));
  EXPECT_GT(info->blocks, 0);
  EXPECT_EQ(QueryAll(*store), before);
  EXPECT_EQ(QueryAll(*store), Expected(rows, INT64_MIN, INT64_MAX));
  // Sealed rows are durable: another store object sees them.
  auto other = Open(Path(), Options());
  EXPECT_EQ(QueryAll(*other), before);
  ExpectSound(*store);
}

INSTANTIATE_TEST_SUITE_P(HeadRows, StoreTest, ::testing::Values(size_t(7), size_t(4096)));

TEST(SqliteStore, HeadIsSealedWhenItAges) {
  TempDir temp("kwatt_store_test");
  auto clock = std::make_shared<ManualClock>(0, kT0);
  SqliteStoreOptions options;
  options.clock = clock;
  options.head_max_age_ns = 60 * kNanosPerSecond;
  auto store = Open(temp.root() / "s.db", options);
  Append(*store, {{kT0, 7200, "d", "m", 1.0}, {kT0 + 1000, 7200, "d", "m", 2.0}});
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(store->Info()->blocks, 0);
  clock->Jump(clock->MonotonicNanos() + 61 * kNanosPerSecond);
  ASSERT_TRUE(store->Flush().ok());
  auto info = store->Info();
  EXPECT_EQ(info->blocks, 1);
  EXPECT_EQ(info->head_rows, 0);
  EXPECT_EQ(info->rows, 2);
}

TEST(SqliteStore, AppendCommitsByItselfAfterTheFlushInterval) {
  TempDir temp("kwatt_store_test");
  auto clock = std::make_shared<ManualClock>(0, kT0);
  SqliteStoreOptions options;
  options.clock = clock;
  auto writer = Open(temp.root() / "s.db", options);
  Append(*writer, {{kT0, 7200, "d", "m", 1.0}});
  auto reader = Open(temp.root() / "s.db", options);
  EXPECT_TRUE(QueryAll(*reader).empty());  // not committed yet
  clock->Jump(clock->MonotonicNanos() + kNanosPerSecond);
  Append(*writer, {{kT0 + 1000, 7200, "d", "m", 2.0}});
  EXPECT_EQ(QueryAll(*reader).size(), 2u);  // the second Append committed both
}

TEST(SqliteStore, AJobWithAControlCharacterIsRefusedAsByPostgres) {
  TempDir temp("kwatt_store_test");
  auto store = Open(temp.root() / "s.db");
  ExpectJobsWithControlCharactersRefused(*store, kT0);
}

TEST(SqliteStore, AnImportsMarkMovesWithItsRows) {
  TempDir temp("kwatt_store_test");
  auto store = Open(temp.root() / "s.db");
  ExpectImportMarksMoveWithTheirRows(*store, kT0);
}

// Rows and mark are committed together: another process sees neither before the flush (a kill
// then loses both), both after.
TEST(SqliteStore, AnImportsMarkIsDurableWithItsRowsNotBefore) {
  TempDir temp("kwatt_store_test");
  auto store = Open(temp.root() / "s.db");
  StringInterner interner;
  RowBatch batch = ToBatch({{kT0, 7200, "nova-1", "m", 1}}, &interner);
  ASSERT_TRUE(store->AppendImported(batch, interner, "a", std::nullopt, {1, false}).ok());
  auto other = Open(temp.root() / "s.db");
  EXPECT_FALSE(other->GetImportMark("a")->has_value());
  EXPECT_TRUE(QueryAll(*other).empty());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(*other->GetImportMark("a"), std::optional(ImportMark{1, false}));
  EXPECT_EQ(QueryAll(*other).size(), 1u);
}

TEST(SqliteStore, AddJobGivesTheNextIdAndNeverReplacesOrWraps) {
  TempDir temp("kwatt_store_test");
  auto store = Open(temp.root() / "s.db");
  jobs::Job job{"lyon", 0, "alice", {"nova-1"}, kT0, std::nullopt, {}};
  EXPECT_EQ(*store->AddJob(job, /*next_id=*/true), 1);
  EXPECT_EQ(*store->AddJob(job, true), 2);
  EXPECT_EQ(*store->AddJob(jobs::Job{"nancy", 0, "bob", {"grisou-1"}, kT0, std::nullopt, {}}, true),
            1);
  job.uid = 2;
  Result<int64_t> again = store->AddJob(job, /*next_id=*/false);
  EXPECT_EQ(again.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(again.status().message().find("job 2 on site lyon already"), std::string::npos)
      << again.status().message();
  job.uid = INT64_MAX;
  job.user = "top";
  EXPECT_EQ(*store->AddJob(job, false), INT64_MAX);
  Result<int64_t> wrapped = store->AddJob(job, true);
  EXPECT_EQ(wrapped.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(wrapped.status().message().find("9223372036854775807"), std::string::npos);
  EXPECT_EQ(store->Jobs("lyon", INT64_MIN, INT64_MAX)->size(), 3u);
  EXPECT_EQ(store->GetJob("lyon", INT64_MAX)->user, "top");
}

TEST(SqliteStore, AWriterLockIsHeldByOneAndTheNextIsToldWho) {
  TempDir temp("kwatt_store_test");
  std::string path = (temp.root() / "s.db").string();
  auto first = TakeWriterLock(path, "s.db", "collector");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = TakeWriterLock(path, "s.db", "collector");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(second.status().message().find("another collector (PID " + std::to_string(getpid())),
            std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("writes into s.db (it holds " + path + ".collector)"),
            std::string::npos)
      << second.status().message();
  first->reset();
  EXPECT_TRUE(TakeWriterLock(path, "s.db", "collector").ok());
}

TEST(SqliteStore, JobsAndCatalogues) {
  TempDir temp("kwatt_store_test");
  auto store = Open(temp.root() / "s.db");
  jobs::Job job{"lyon",
                42,
                "alice",
                {"nova-1", "nova-2"},
                kT0,
                kT0 + 3600 * kNanosPerSecond,
                {"monitor=wattmetre_power_watt", "deploy"}};
  jobs::Job running{"lyon", 43, "bob", {"nova-3"}, kT0 + 7200 * kNanosPerSecond, std::nullopt, {}};
  ASSERT_TRUE(store->PutJob(job).ok());
  ASSERT_TRUE(store->PutJob(running).ok());
  auto got = store->GetJob("lyon", 42);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, job);
  EXPECT_EQ(*store->GetJob("lyon", 43), running);
  EXPECT_EQ(store->GetJob("nancy", 42).status().code(), Status::Code::kNotFound);
  auto jobs = store->Jobs("lyon", kT0, kT0 + 86400 * kNanosPerSecond);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(*jobs, (std::vector<jobs::Job>{job, running}));
  EXPECT_EQ(*store->Jobs("lyon", kT0 + 3600 * kNanosPerSecond, kT0 + 7200 * kNanosPerSecond),
            std::vector<jobs::Job>{});
  job.user = "carol";
  ASSERT_TRUE(store->PutJob(job).ok());
  EXPECT_EQ(store->GetJob("lyon", 42)->user, "carol");
  jobs::Job bad = job;
  bad.nodes = {"a\nb"};
  EXPECT_EQ(store->PutJob(bad).code(), Status::Code::kInvalidArgument);

  Result<Catalogue> nova =
      Catalogue::FromJson(R"({"uid":"nova","metrics":[{"name":"m","period":1000}]})");
  ASSERT_TRUE(nova.ok());
  ASSERT_TRUE(store->PutCatalogue("lyon", "nova", *nova).ok());
  Result<Catalogue> back = store->GetCatalogue("lyon", "nova");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->json(), R"([{"name":"m","period":1000}])");
  EXPECT_EQ(back->entries()[0].period_ms, 1000);
  EXPECT_EQ(store->GetCatalogue("lyon", "taurus").status().code(), Status::Code::kNotFound);
  store.reset();
  store = Open(temp.root() / "s.db");
  EXPECT_EQ(store->GetJob("lyon", 42)->user, "carol");
  auto info = store->Info();
  EXPECT_EQ(info->jobs, 2);
  EXPECT_EQ(info->catalogues, 1);
}

TEST(SqliteStore, RefusesWhatIsNotAStore) {
  TempDir temp("kwatt_store_test");
  WriteFile(temp.root() / "text.db", std::string(10000, 'x'));
  auto store = OpenSqliteStore((temp.root() / "text.db").string());
  EXPECT_EQ(store.status().code(), Status::Code::kCorruption) << store.status().ToString();
  SqliteStoreOptions options;
  options.create_if_missing = false;
  EXPECT_EQ(OpenSqliteStore((temp.root() / "none.db").string(), options).status().code(),
            Status::Code::kNotFound);
  // An empty file is not made a store by what only reads one (kwatt store check, info, cat).
  WriteFile(temp.root() / "empty.db", "");
  auto empty = OpenSqliteStore((temp.root() / "empty.db").string(), options);
  EXPECT_EQ(empty.status().code(), Status::Code::kNotFound) << empty.status().ToString();
  EXPECT_NE(empty.status().message().find("is an empty file, not a store"), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(temp.root() / "empty.db"), 0u);
}

// SQLite says "unable to open database file" whatever the cause: the system's error names it.
TEST(SqliteStore, AStoreThatCannotBeMadeNamesTheCause) {
  TempDir temp("kwatt_store_test");
  WriteFile(temp.root() / "a-file", "");
  for (auto [path, cause] :
       {std::pair{temp.root() / "missing" / "s.db", "No such file or directory"},
        std::pair{temp.root() / "a-file" / "s.db", "Not a directory"}}) {
    auto store = OpenSqliteStore(path.string());
    EXPECT_EQ(store.status().code(), Status::Code::kIOError) << store.status().ToString();
    EXPECT_NE(store.status().message().find(path.string()), std::string::npos);
    EXPECT_NE(store.status().message().find(cause), std::string::npos) << store.status().message();
  }
}

// `kwatt serve` and `kwatt collect` started together on a new store: every process opening it
// at once opens it (one creates it, the others wait for it), none fails with "database is locked".
TEST(SqliteStore, ProcessesCreatingOneStoreAtOnceAllOpenIt) {
  TempDir temp("kwatt_store_test");
  constexpr int kRounds = 20, kProcesses = 4;
  for (int round = 0; round < kRounds; ++round) {
    std::string path = (temp.root() / ("s" + std::to_string(round) + ".db")).string();
    int go[2], report[2];
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(report), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < kProcesses; ++i) {
      pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        close(go[1]);
        char byte;
        (void)!read(go[0], &byte, 1);  // all start together
        auto store = OpenSqliteStore(path);
        Status status = store.ok() ? (*store)->Flush() : store.status();
        if (!status.ok()) {
          std::string line = status.message() + "\n";
          (void)!write(report[1], line.data(), line.size());
        }
        _exit(status.ok() ? 0 : 1);
      }
      children.push_back(child);
    }
    close(go[0]);
    close(report[1]);
    close(go[1]);  // EOF: go
    std::string failures;
    char buffer[512];
    for (ssize_t n; (n = read(report[0], buffer, sizeof buffer)) > 0;) failures.append(buffer, n);
    close(report[0]);
    for (pid_t child : children) {
      int status = 0;
      waitpid(child, &status, 0);
    }
    ASSERT_EQ(failures, "") << "round " << round;
  }
}

// Two connections to one new store (kwatt serve --store lends several), each appending rows of the
// same new series: neither fails on the series the other made since it read the store (a UNIQUE
// error once), and every row is kept.
TEST(SqliteStore, TwoConnectionsMakingTheSameSeriesBothAppend) {
  TempDir temp("kwatt_store_test");
  const std::string path = (temp.root() / "s.db").string();
  auto first = OpenSqliteStore(path);
  auto second = OpenSqliteStore(path);
  ASSERT_TRUE(first.ok() && second.ok());
  std::vector<Row> rows;
  for (int i = 0; i < 6; ++i) {
    rows.push_back({kT0 + i * kNanosPerSecond, 7200, "nova-1", "m", double(i)});
  }
  for (int i = 0; i < 6; ++i) {
    StringInterner interner;
    Store& store = i % 2 ? **second : **first;
    Status status = store.Append(ToBatch({rows[size_t(i)]}, &interner), interner);
    ASSERT_TRUE(status.ok()) << "row " << i << ": " << status.ToString();
    ASSERT_TRUE(store.Flush().ok());
  }
  EXPECT_EQ(QueryAll(**first), rows);
  auto info = (*second)->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->series, 1);
}

// Writes a store with blocks and returns its bytes once closed (its WAL checkpointed).
std::string StoreWithBlocks(const fs::path& path, std::vector<Row>* rows) {
  SqliteStoreOptions options;
  options.head_rows = 100;
  auto store = Open(path, options);
  for (int i = 0; i < 1000; ++i) {
    rows->push_back({kT0 + i * kNanosPerSecond, 7200, "d", "m", std::sqrt(double(i))});
  }
  Append(*store, *rows);
  store.reset();
  EXPECT_FALSE(fs::exists(path.string() + "-wal"));
  return ReadFile(path);
}

TEST(SqliteStore, CheckNamesADamagedBlock) {
  TempDir temp("kwatt_store_test");
  std::vector<Row> rows;
  std::string bytes = StoreWithBlocks(temp.root() / "good.db", &rows);
  // The third block's zstd frame (magic 28 b5 2f fd), a byte in its compressed data flipped.
  const std::string kMagic = "\x28\xb5\x2f\xfd";
  size_t at = bytes.find(kMagic);
  for (int i = 0; i < 2 && at != std::string::npos; ++i) at = bytes.find(kMagic, at + 4);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 40] = char(bytes[at + 40] ^ 0x01);
  fs::path damaged = temp.root() / "damaged.db";
  WriteFile(damaged, bytes);
  auto store = Open(damaged);
  ASSERT_TRUE(store);
  auto report = store->Check();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_NE(report->problems[0].find("damaged.db: block 3 (series 1: d m {}"), std::string::npos)
      << report->problems[0];
  EXPECT_NE(report->problems[0].find("checksum"), std::string::npos) << report->problems[0];
  EXPECT_EQ(report->blocks_checked, 10);
  // Reading that block is an error, not wrong rows.
  StoreQuery query;
  query.end = INT64_MAX;
  Status status =
      store->Query(query, [](const RowBatch&, const StringInterner&) { return Status::OK(); });
  EXPECT_EQ(status.code(), Status::Code::kCorruption) << status.ToString();
  EXPECT_NE(status.message().find("block 3: its checksum"), std::string::npos) << status.message();
  // The undamaged copy is sound.
  auto good = Open(temp.root() / "good.db");
  ExpectSound(*good);
  EXPECT_EQ(QueryAll(*good), rows);
}

TEST(SqliteStore, CheckNamesDamagedPages) {
  TempDir temp("kwatt_store_test");
  std::vector<Row> rows;
  std::string bytes = StoreWithBlocks(temp.root() / "good.db", &rows);
  // Every page after the first few, its header bytes overwritten: SQLite's own structure.
  for (size_t page = 2; page * 4096 < bytes.size(); ++page) {
    for (size_t k = 0; k < 8; ++k) bytes[page * 4096 + k] = char(0xa5);
  }
  fs::path damaged = temp.root() / "damaged.db";
  WriteFile(damaged, bytes);
  auto store = OpenSqliteStore(damaged.string());
  if (!store.ok()) {
    EXPECT_EQ(store.status().code(), Status::Code::kCorruption) << store.status().ToString();
    return;
  }
  auto report = (*store)->Check();
  if (report.ok()) {
    ASSERT_FALSE(report->ok());
    EXPECT_NE(report->problems[0].find("damaged.db"), std::string::npos) << report->problems[0];
  } else {
    EXPECT_EQ(report.status().code(), Status::Code::kCorruption) << report.status().ToString();
  }
}

// Runs SQL on a closed store's file, as a damaged tool or a hand would.
void Tamper(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << error;
  sqlite3_free(error);
  sqlite3_close(db);
}

TEST(SqliteStore, CheckComparesBlocksWithTheirKeys) {
  TempDir temp("kwatt_store_test");
  std::vector<Row> rows;
  fs::path path = temp.root() / "s.db";
  StoreWithBlocks(path, &rows);
  Tamper(
      path,
      "UPDATE blocks SET rows = 7 WHERE id = 2; UPDATE blocks SET start = start + 1 WHERE id = 5;"
      "UPDATE series SET max_span = 10 WHERE id = 1; INSERT INTO head VALUES(99, 0, 0, 0, 0)");
  auto store = Open(path);
  auto report = store->Check();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::string all;
  for (const auto& problem : report->problems) all += problem + "\n";
  EXPECT_NE(all.find("block 2 (series 1: d m {}, from 2025-04-18T18:15:00Z): it holds 100 rows, "
                     "the table records 7"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("block 5 (series 1: d m {}, from 2025-04-18T18:20:00.000001Z): its rows span "
                     "other instants"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("block 1 (series 1: d m {}, from 2025-04-18T18:13:20Z): it is longer than its "
                     "series' max_span"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("1 head rows belong to no series"), std::string::npos) << all;
}

TEST(SqliteStore, RefusesAStoreOfAnotherVersion) {
  TempDir temp("kwatt_store_test");
  fs::path path = temp.root() / "s.db";
  Open(path).reset();
  Tamper(path, "UPDATE meta SET value = '2' WHERE key = 'version'");
  auto store = OpenSqliteStore(path.string());
  EXPECT_EQ(store.status().code(), Status::Code::kCorruption);
  EXPECT_NE(store.status().message().find("format version 2, this kwatt reads version 1"),
            std::string::npos)
      << store.status().message();
}

// The writer of the kill test: appends rows numbered from where the store ends, flushes every few
// batches, and after each Flush writes the number of rows acknowledged to `fd`. Never returns.
[[noreturn]] void KillTestWriter(const std::string& path, int fd) {
  SqliteStoreOptions options;
  options.head_rows = 50;
  auto opened = OpenSqliteStore(path, options);
  if (!opened.ok()) _exit(3);
  Store& store = **opened;
  auto info = store.Info();
  if (!info.ok()) _exit(4);
  int64_t next = info->rows;
  for (int64_t batch_number = 0;; ++batch_number) {
    StringInterner interner;
    RowBatch batch;
    for (int i = 0; i < 37; ++i, ++next) {
      batch.time.push_back(kT0 + next * 10 * kNanosPerMilli);
      batch.utc_offset.push_back(7200);
      batch.device.push_back(interner.Intern("node-" + std::to_string(next % 3)));
      batch.metric.push_back(interner.Intern("m"));
      batch.value.push_back(double(next) / 10);
      batch.labels.push_back(interner.Intern("{}"));
    }
    if (!store.Append(batch, interner).ok()) _exit(5);
    if (batch_number % 4 == 3) {
      if (!store.Flush().ok()) _exit(6);
      if (write(fd, &next, sizeof next) != sizeof next) _exit(7);
    }
  }
}

TEST(SqliteStore, SurvivesKillNine) {
  TempDir temp("kwatt_store_test");
  std::string path = (temp.root() / "killed.db").string();
  std::mt19937 random(2026);
  int64_t acknowledged = 0;
  for (int round = 0; round < 6; ++round) {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(pipe_fds[0]);
      KillTestWriter(path, pipe_fds[1]);
    }
    close(pipe_fds[1]);
    // Let it acknowledge a random number of flushes, then kill it after a random pause.
    int flushes = 1 + int(random() % 30);
    for (int i = 0; i < flushes; ++i) {
      int64_t count;
      ASSERT_EQ(read(pipe_fds[0], &count, sizeof count), ssize_t(sizeof count))
          << "the writer died (round " << round << ")";
      acknowledged = count;
    }
    usleep(useconds_t(random() % 5000));
    kill(child, SIGKILL);
    int wstatus;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the writer exited with " << WEXITSTATUS(wstatus);
    // Acknowledgements written before the kill and not read yet count too.
    int64_t count;
    while (read(pipe_fds[0], &count, sizeof count) == ssize_t(sizeof count)) acknowledged = count;
    close(pipe_fds[0]);

    auto store = Open(path);
    ASSERT_TRUE(store);
    ExpectSound(*store);
    std::vector<Row> rows = QueryAll(*store);
    ASSERT_GE(int64_t(rows.size()), acknowledged) << "round " << round;
    // Exactly rows 0..n-1: nothing lost before the last Flush, nothing half-written after it.
    std::vector<int64_t> seen(rows.size(), 0);
    for (const Row& r : rows) {
      int64_t n = (r.time - kT0) / (10 * kNanosPerMilli);
      ASSERT_TRUE(n >= 0 && n < int64_t(rows.size())) << r;
      ASSERT_EQ(r.device, "node-" + std::to_string(n % 3));
      ASSERT_EQ(std::bit_cast<uint64_t>(r.value), std::bit_cast<uint64_t>(double(n) / 10));
      ++seen[size_t(n)];
    }
    ASSERT_EQ(std::count(seen.begin(), seen.end(), 1), int64_t(rows.size()));
  }
  EXPECT_GT(acknowledged, 0);
}

}  // namespace
}  // namespace kwatt::store::sqlite_store_test

// The PostgreSQL engine, against a real PostgreSQL 15 cluster started for these tests
// (src/testing/postgres.h): one database per test.
#include "kwatt/store/postgres_store.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/core/null_value.h"
#include "kwatt/core/time.h"
#include "kwatt/store/writer_lock.h"
#include "src/testing/postgres.h"
#include "src/testing/store_rows.h"

namespace kwatt::store::postgres_store_test {
namespace {

using testing::Append;
using testing::Expected;
using testing::ExpectImportMarksMoveWithTheirRows;
using testing::ExpectJobsWithControlCharactersRefused;
using testing::ExpectSound;
using testing::QueryAll;
using testing::QueryRows;
using testing::Row;
using testing::ToBatch;

constexpr UnixNanos kT0 = 1'745'000'000 * kNanosPerSecond;  // 2025-04-18T18:13:20Z (CEST)
constexpr int64_t kDay = 86'400 * kNanosPerSecond;

// One cluster for the whole test program, started on first use.
kwatt::testing::TestPostgres& Cluster() {
  static std::unique_ptr<kwatt::testing::TestPostgres> cluster = [] {
    auto started = kwatt::testing::TestPostgres::Start();
    if (!started.ok()) {
      ADD_FAILURE() << started.status().ToString();
      return std::unique_ptr<kwatt::testing::TestPostgres>();
    }
    return std::move(started).value();
  }();
  if (!cluster) std::abort();
  return *cluster;
}

// SQL on the test's database, as a user of the store would write it; the first column of the
// first row.
std::string Sql(const std::string& uri, const std::string& sql) {
  PGconn* conn = PQconnectdb(uri.c_str());
  PGresult* r = PQexec(conn, sql.c_str());
  std::string out;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK) {
    ADD_FAILURE() << sql << ": " << PQresultErrorMessage(r);
  }
  PQclear(r);
  PQfinish(conn);
  return out;
}

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto uri = Cluster().NewDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    uri_ = *uri;
    store_ = Open();
    ASSERT_TRUE(store_);
  }

  std::unique_ptr<Store> Open(PostgresStoreOptions options = {}) {
    auto store = OpenPostgresStore(uri_, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  std::string uri_;
  std::unique_ptr<Store> store_;
};

// Rows as Kwollect serves them (Paris offsets, jsonb's compact labels) come back exactly.
std::vector<Row> KwollectRows() {
  std::vector<Row> rows;
  for (int i = 0; i < 50; ++i) {
    for (const char* device : {"nova-2", "nova-1", "gros-10"}) {
      rows.push_back(Row{kT0 + i * 20 * kNanosPerMilli + 123 * kNanosPerMicro, 7200, device,
                         "wattmetre_power_watt", 95.5 + i * 0.1,
                         R"({"_device_orig":["wattmetre1-port7"]})"});
      rows.push_back(Row{kT0 + i * kNanosPerSecond, 7200, device, "bmc_temp_celsius",
                         double(40 + i), R"({"id":"3","sensor":"CPU1 Temp"})"});
    }
  }
  return rows;
}

TEST_F(PostgresStoreTest, RowsComeBackExactlyInTheStoresOrder) {
  std::vector<Row> rows = KwollectRows();
  // Values whose bits must survive.
  uint64_t payload = 0x7ff8'0000'dead'beefULL;
  int k = 0;
  for (double v : {-0.0, std::bit_cast<double>(payload), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::denorm_min(), 1e308, 152601965318.0}) {
    rows.push_back(Row{kT0 + 7 * kNanosPerSecond + k++ * kNanosPerMicro, 7200, "nova-1",
                       "odd_values", v, "{}"});
  }
  Append(*store_, rows);
  EXPECT_EQ(QueryAll(*store_), Expected(rows, INT64_MIN, INT64_MAX));
  // Another connection sees them (each Append commits).
  auto other = Open();
  ASSERT_TRUE(other);
  EXPECT_EQ(QueryAll(*other), Expected(rows, INT64_MIN, INT64_MAX));
  ASSERT_TRUE(store_->Flush().ok());
}

TEST_F(PostgresStoreTest, ANullValueIsSqlNullAndComesBackNullNotNaN) {
  std::vector<Row> rows = {
      Row{kT0, 7200, "nova-1", "my_reading", NullValue(), "{}"},
      Row{kT0 + kNanosPerSecond, 7200, "nova-1", "my_reading",
          std::numeric_limits<double>::quiet_NaN(), "{}"},
  };
  Append(*store_, rows);
  // As Kwollect keeps it, for SQL users: NULL, and "NaN" as the float NaN.
  EXPECT_EQ(Sql(uri_, "SELECT count(*) FROM metrics WHERE value IS NULL"), "1");
  EXPECT_EQ(Sql(uri_, "SELECT count(*) FROM metrics WHERE value = 'NaN'"), "1");
  std::vector<Row> back = QueryAll(*store_);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(IsNullValue(back[0].value));
  EXPECT_TRUE(std::isnan(back[1].value) && !IsNullValue(back[1].value));
}

TEST_F(PostgresStoreTest, LabelsComeBackInJsonbCanonicalFormAndOffsetsAreParis) {
  std::vector<Row> rows = {Row{kT0, 0, "nova-1", "m", 1,
                               R"({"sensor": "CPU1", "id": 3, "x": {"b": [1, 2], "a": "é\"q"}})"},
                           Row{kT0 - 150 * kDay, 0, "nova-1", "m", 2, "{}"}};  // in winter
  Append(*store_, rows);
  std::vector<Row> got = QueryAll(*store_);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].labels, "{}");
  EXPECT_EQ(got[0].utc_offset, 3600);
  EXPECT_EQ(got[1].labels, R"({"x":{"a":"é\"q","b":[1,2]},"id":3,"sensor":"CPU1"})");
  EXPECT_EQ(got[1].utc_offset, 7200);
}

TEST_F(PostgresStoreTest, WindowsFiltersAndBatches) {
  std::vector<Row> rows = KwollectRows();
  Append(*store_, rows);
  StoreQuery query;
  query.start = kT0 + 123 * kNanosPerMicro;                      // inclusive, on a row
  query.end = kT0 + 20 * kNanosPerMilli + 123 * kNanosPerMicro;  // exclusive, on a row
  EXPECT_EQ(QueryRows(*store_, query), Expected(rows, query.start, query.end));
  query.start = kT0 + 1;  // inside a microsecond: rounded up
  query.end = kT0 + 10 * kNanosPerSecond + 1;
  query.devices = {"nova-1", "gros-10", "nova-1", "absent"};
  query.metrics = {"bmc_temp_celsius"};
  query.batch_rows = 3;
  size_t batches = 0;
  std::vector<Row> got = QueryRows(*store_, query, &batches);
  EXPECT_EQ(got, Expected(rows, query.start, query.end, query.devices, query.metrics));
  EXPECT_EQ(got.size(), 20u);
  EXPECT_EQ(batches, 7u);
  query.end = query.start;
  EXPECT_TRUE(QueryRows(*store_, query).empty());
  // A callback's error stops the query and is returned.
  query.end = kT0 + 10 * kNanosPerSecond;
  Status stop = store_->Query(
      query, [](const RowBatch&, const StringInterner&) { return Status::Incomplete("enough"); });
  EXPECT_EQ(stop.code(), Status::Code::kIncomplete);
  EXPECT_EQ(QueryRows(*store_, query).size(), 18u);  // the store is usable afterwards
}

TEST_F(PostgresStoreTest, ABatchIsStoredWholeOrNotAtAll) {
  std::vector<Row> good = KwollectRows();
  Append(*store_, good);
  std::vector<Row> bad = {Row{kT0 + 100 * kDay, 7200, "nova-1", "m", 1, "{}"},
                          Row{kT0 + 101 * kDay, 7200, "nova-1", "m", 2, "{not json"}};
  StringInterner interner;
  RowBatch batch = ToBatch(bad, &interner);
  Status status = store_->Append(batch, interner);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find("nothing of the batch was stored"), std::string::npos);
  // Finer than the microsecond: refused before PostgreSQL (the rule every engine shares).
  bad = {Row{kT0 + 1, 7200, "nova-1", "m", 1, "{}"}};
  RowBatch fine = ToBatch(bad, &interner);
  EXPECT_EQ(store_->Append(fine, interner).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(QueryAll(*store_), Expected(good, INT64_MIN, INT64_MAX));
  // The partition the failed batch made is gone with it, and is made again when needed.
  Append(*store_, {Row{kT0 + 100 * kDay, 7200, "nova-1", "m", 1, "{}"}});
  EXPECT_EQ(QueryAll(*store_).size(), good.size() + 1);
  ExpectSound(*store_);
}

TEST_F(PostgresStoreTest, KwollectsTablePartitionedByTimeForSqlUsers) {
  std::vector<Row> rows;
  for (int day = 0; day < 21; ++day) {
    rows.push_back(
        Row{kT0 + day * kDay, 7200, "nova-1", "wattmetre_power_watt", 100.5 + day, "{}"});
  }
  Append(*store_, rows);
  // Three weeks: three or four partitions of 7 days, each with its index.
  int partitions = std::stoi(
      Sql(uri_, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'metrics'::regclass"));
  EXPECT_GE(partitions, 3);
  EXPECT_LE(partitions, 4);
  // What Kwollect's SQL users and Grafana write.
  EXPECT_EQ(Sql(uri_,
                "SELECT sum(value) FROM metrics WHERE device_id = 'nova-1' AND metric_id = "
                "'wattmetre_power_watt' AND timestamp >= '2025-04-18 20:13:20+02' AND timestamp "
                "< '2025-04-20 20:13:20+02'"),
            "202");
  std::string plan = Sql(uri_,
                         "EXPLAIN SELECT * FROM metrics WHERE device_id = 'nova-1' AND timestamp "
                         "BETWEEN '2025-04-18 20:00+02' AND '2025-04-18 21:00+02'");
  EXPECT_NE(plan.find("metrics_p"), std::string::npos) << plan;  // pruned to a partition
  auto info = store_->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->rows, 21);
  EXPECT_EQ(info->series, 1);
  EXPECT_EQ(info->blocks, partitions);
  EXPECT_EQ(info->first, kT0);
  EXPECT_EQ(info->last, kT0 + 20 * kDay);
  EXPECT_GT(info->bytes, 0);
  auto report = store_->Check();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->rows_checked, 21);
  EXPECT_EQ(report->blocks_checked, partitions);
}

TEST_F(PostgresStoreTest, CheckNamesAPartitionWhoseIndexIsNotValid) {
  // As a failed CREATE INDEX CONCURRENTLY leaves it: queries then scan the whole partition.
  Append(*store_, {Row{kT0, 7200, "nova-1", "m", 1, "{}"}});
  Sql(uri_,
      "UPDATE pg_index SET indisvalid = false WHERE indrelid IN (SELECT inhrelid FROM "
      "pg_inherits WHERE inhparent = 'metrics'::regclass)");
  auto report = store_->Check();
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_NE(report->problems[0].find("has no valid index on (device_id, timestamp): REINDEX"),
            std::string::npos)
      << report->problems[0];
}

TEST_F(PostgresStoreTest, AJobWithAControlCharacterIsRefusedAsByTheEmbeddedStore) {
  ExpectJobsWithControlCharactersRefused(*store_, kT0);
}

TEST_F(PostgresStoreTest, AnImportsMarkMovesWithItsRowsAsInTheEmbeddedStore) {
  ExpectImportMarksMoveWithTheirRows(*store_, kT0);
}

TEST_F(PostgresStoreTest, AddJobGivesTheNextIdAndNeverReplacesOrWraps) {
  jobs::Job job{"lyon", 0, "alice", {"nova-1"}, kT0, std::nullopt, {}};
  EXPECT_EQ(*store_->AddJob(job, /*next_id=*/true), 1);
  EXPECT_EQ(*store_->AddJob(job, true), 2);
  job.uid = 2;
  Result<int64_t> again = store_->AddJob(job, /*next_id=*/false);
  EXPECT_EQ(again.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(again.status().message().find("job 2 on site lyon already"), std::string::npos)
      << again.status().message();
  job.uid = INT64_MAX;
  job.user = "top";
  EXPECT_EQ(*store_->AddJob(job, false), INT64_MAX);
  Result<int64_t> wrapped = store_->AddJob(job, true);
  EXPECT_EQ(wrapped.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(wrapped.status().message().find("9223372036854775807"), std::string::npos);
  EXPECT_EQ(store_->Jobs("lyon", INT64_MIN, INT64_MAX)->size(), 3u);
  EXPECT_EQ(store_->GetJob("lyon", INT64_MAX)->user, "top");
  // The store still takes statements after a refused add (its transaction was ended).
  EXPECT_TRUE(store_->PutJob(job).ok());
}

TEST_F(PostgresStoreTest, AWriterLockIsHeldByOneAndTheNextIsToldWho) {
  auto first = TakeWriterLock(uri_, "the-store", "collector");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = TakeWriterLock(uri_, "the-store", "collector");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(second.status().message().find("another collector (PID " + std::to_string(getpid())),
            std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("writes into the-store"), std::string::npos);
  EXPECT_TRUE(TakeWriterLock(uri_, "the-store", "importer").ok());  // another name, another lock
  first->reset();
  EXPECT_TRUE(TakeWriterLock(uri_, "the-store", "collector").ok());
}

TEST_F(PostgresStoreTest, JobsAndCataloguesAsTheEmbeddedEngineKeepsThem) {
  jobs::Job running{"lyon", 7, "alice", {"nova-1", "nova-2"}, kT0, std::nullopt, {"monitor"}};
  jobs::Job done{"lyon", 8, "bob", {"nova-3"}, kT0 - 3600 * kNanosPerSecond, kT0, {}};
  ASSERT_TRUE(store_->PutJob(running).ok());
  ASSERT_TRUE(store_->PutJob(done).ok());
  auto got = store_->GetJob("lyon", 7);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, running);
  running.stopped_at = kT0 + 60 * kNanosPerSecond;  // replaced
  ASSERT_TRUE(store_->PutJob(running).ok());
  EXPECT_EQ(*store_->GetJob("lyon", 7), running);
  EXPECT_EQ(store_->GetJob("nancy", 7).status().code(), Status::Code::kNotFound);
  auto overlapping = store_->Jobs("lyon", kT0 - 1, kT0 + 1);
  ASSERT_TRUE(overlapping.ok());
  ASSERT_EQ(overlapping->size(), 2u);
  EXPECT_EQ((*overlapping)[0], done);
  EXPECT_TRUE(store_->Jobs("lyon", kT0 + 61 * kNanosPerSecond, kT0 + kDay)->empty());
  Result<Catalogue> catalogue =
      Catalogue::FromJson(R"([{"name": "wattmetre_power_watt", "period": 1000}])");
  ASSERT_TRUE(catalogue.ok());
  ASSERT_TRUE(store_->PutCatalogue("lyon", "nova", *catalogue).ok());
  Result<Catalogue> back = store_->GetCatalogue("lyon", "nova");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->json(), catalogue->json());
  EXPECT_EQ(back->entries()[0].name, "wattmetre_power_watt");
  // A damaged one (SQL users can write the table) is named where it is read.
  Sql(uri_, "UPDATE kwatt_catalogues SET metrics = '[{\"period\": 1}]'");
  EXPECT_EQ(store_->GetCatalogue("lyon", "nova").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(store_->GetCatalogue("lyon", "taurus").status().code(), Status::Code::kNotFound);
  auto info = store_->Info();
  EXPECT_EQ(info->jobs, 2);
  EXPECT_EQ(info->catalogues, 1);
}

TEST_F(PostgresStoreTest, OpeningNamesWhatIsWrong) {
  // A database without a store, when asked not to create one.
  auto empty = Cluster().NewDatabase();
  ASSERT_TRUE(empty.ok());
  PostgresStoreOptions no_create;
  no_create.create_if_missing = false;
  EXPECT_EQ(OpenPostgresStore(*empty, no_create).status().code(), Status::Code::kNotFound);
  // Someone else's metrics table.
  Sql(*empty, "CREATE TABLE metrics (x int)");
  auto foreign = OpenPostgresStore(*empty);
  EXPECT_EQ(foreign.status().code(), Status::Code::kCorruption);
  EXPECT_NE(foreign.status().message().find("not a kwatt store"), std::string::npos);
  // Another format.
  Sql(uri_, "UPDATE kwatt_meta SET value = '9' WHERE key = 'version'");
  EXPECT_EQ(OpenPostgresStore(uri_).status().code(), Status::Code::kCorruption);
  // Nobody there: Unavailable, without the password.
  auto absent = OpenPostgresStore("postgresql://alice:s3cret@127.0.0.1:1/db?connect_timeout=2");
  EXPECT_EQ(absent.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(absent.status().message().find("s3cret"), std::string::npos)
      << absent.status().message();
  EXPECT_NE(absent.status().message().find("postgresql://127.0.0.1:1/db"), std::string::npos)
      << absent.status().message();
}

TEST_F(PostgresStoreTest, TwoWritersAtOnceIntoNewPartitions) {
  // Each writer makes partitions the other needs too: they must not collide.
  auto writer = [&](const std::string& device) {
    auto store = OpenPostgresStore(uri_);
    ASSERT_TRUE(store.ok());
    for (int day = 0; day < 30; day += 3) {
      std::vector<Row> rows = {Row{kT0 + day * kDay, 7200, device, "m", double(day), "{}"}};
      StringInterner interner;
      RowBatch batch = ToBatch(rows, &interner);
      Status status = (*store)->Append(batch, interner);
      ASSERT_TRUE(status.ok()) << status.ToString();
    }
  };
  std::thread a(writer, "nova-1"), b(writer, "nova-2");
  a.join();
  b.join();
  EXPECT_EQ(QueryAll(*store_).size(), 20u);
  ExpectSound(*store_);
}

}  // namespace
}  // namespace kwatt::store::postgres_store_test

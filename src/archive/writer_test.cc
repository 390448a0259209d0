// The archive writer driven directly as a RowSink (no server): resuming from what an interrupted
// run left, and refusing what it cannot trust.
#include "kwatt/archive/writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "kwatt/archive/format.h"
#include "kwatt/archive/lock.h"
#include "kwatt/archive/manifest.h"
#include "kwatt/archive/reader.h"
#include "kwatt/core/row_parser.h"
#include "kwatt/core/time.h"
#include "src/testing/archive_files.h"
#include "src/testing/manual_clock.h"
#include "src/testing/temp_dir.h"

namespace kwatt::archive::writer_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr UnixNanos kT0 = 1744977600LL * kNanosPerSecond;  // 2025-04-18T12:00:00Z
constexpr UnixNanos kMinute = 60 * kNanosPerSecond;
const char kNova1[] = "nova-1.lyon.grid5000.fr";

using test_files::ReadFile;
using test_files::WriteFile;

void AppendFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
}

class TempDir : public kwatt::testing::TempDir {
 public:
  TempDir() : kwatt::testing::TempDir("kwatt_writer_test") {}
  std::string archive() const { return (root() / "archive").string(); }
};

BackupQuery Query() {
  BackupQuery query;
  query.api = "http://127.0.0.1:1/stable";
  query.nodes = {kNova1};
  query.start = kT0;
  query.end = kT0 + 10 * kMinute;
  return query;
}

RowsReport Resolved() {
  RowsReport report;
  report.nodes = {NodeName{"nova-1", "lyon"}};
  report.start = kT0;
  report.end = kT0 + 10 * kMinute;
  return report;
}

// Wattmeter rows of nova-1, one every 10 ms over [from, to): about 200 bytes each, so that frames
// (closed at a minute boundary once they hold 1 MiB) get committed.
void MakeRows(UnixNanos from, UnixNanos to, StringInterner* interner, RowBatch* batch,
              UnixNanos step = 10'000'000) {
  std::string text;
  for (UnixNanos t = from; t < to; t += step) {
    text += R"({"timestamp":")" + FormatParisTimestamp(t) +
            R"(","device_id":"nova-1","metric_id":"wattmetre_power_watt","value":123.45,)"
            R"("labels":{"_device_orig":["wattmetre1-port6"]}})"
            "\n";
  }
  kwatt::internal::RowStreamParser parser(interner, kwatt::internal::Framing::kJsonLines);
  ASSERT_TRUE(parser.Feed(text, batch).ok());
  ASSERT_TRUE(parser.Finish().ok());
}

// A backup interrupted after its first 3 minutes of rows: the manifest incomplete, frames
// committed and journaled. Returns the writer's view of the journal.
void Interrupted(const std::string& dir) {
  Result<std::unique_ptr<ArchiveWriter>> writer = ArchiveWriter::Open(dir, Query(), "test");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
  StringInterner interner;
  RowBatch batch;
  MakeRows(kT0, kT0 + 3 * kMinute, &interner, &batch);
  ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
  // Destroyed without Finish: as if killed.
}

std::vector<JournalRecord> Journal(const std::string& dir) {
  return ParseJournal(ReadFile(fs::path(dir) / kJournalName));
}

TEST(WriterTest, AnInterruptedBackupIsResumedToTheUninterruptedArchive) {
  TempDir temp;
  Interrupted(temp.archive());
  std::vector<JournalRecord> journal = Journal(temp.archive());
  ASSERT_EQ(journal.size(), 1u);
  EXPECT_GT(journal[0].frames, 0);

  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), Query(), "test");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->resuming());
  ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
  StringInterner interner;
  RowBatch batch;
  MakeRows(kT0, kT0 + 4 * kMinute, &interner, &batch);
  ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
  Status finished = (*writer)->Finish(Resolved());
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  VerifyReport report;
  Status verified = VerifyArchive(temp.archive(), &report);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  EXPECT_EQ(report.rows, 4 * 60 * 100);
}

TEST(WriterTest, ARecordingsWindowEndsWhenItStopsAndARestartGoesOnWithIt) {
  TempDir temp;
  BackupQuery query = Query();
  query.end.reset();  // a recording: its end is not known beforehand
  WriterOptions options;
  options.recording = true;
  // The rows' end has not passed "now": no matter.
  options.clock = std::make_shared<ManualClock>(0, kT0 + kMinute);
  RowsReport begun = Resolved();
  begun.end = kT0;  // provisional
  {
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), query, "test", options);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE((*writer)->Begin(begun).ok());
    StringInterner interner;
    RowBatch batch;
    MakeRows(kT0, kT0 + 3 * kMinute, &interner, &batch);
    ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
    // Stopped without Finish: frames of the first minutes are committed, the rest is lost.
  }
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), query, "test", options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->resuming());
  RowsReport later = Resolved();
  later.start = kT0 + 5 * kMinute;  // a restarted recording: its own start and end are ignored
  later.end = later.start;
  ASSERT_TRUE((*writer)->Begin(later).ok());
  StringInterner interner;
  RowBatch batch;
  MakeRows(kT0 + 5 * kMinute, kT0 + 6 * kMinute, &interner, &batch);
  ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
  RowsReport stopped = later;
  stopped.end = kT0 + 6 * kMinute;
  Status finished = (*writer)->Finish(stopped);
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  VerifyReport report;
  Status verified = VerifyArchive(temp.archive(), &report);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  Result<Manifest> manifest = ReadManifest(temp.archive());
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_TRUE(manifest->complete);
  EXPECT_EQ(manifest->window_start, kT0);
  EXPECT_EQ(manifest->window_end, kT0 + 6 * kMinute);
  EXPECT_GT(report.rows, 60 * 100);      // the committed minutes, then the last one
  EXPECT_LT(report.rows, 4 * 60 * 100);  // the frame in progress at the stop was lost
}

TEST(WriterTest, ARecordingCommitsEveryTenSecondsWhateverItsSize) {
  // A meter's few rows a second never fill a frame of kFrameMinBytes: each 10 s are committed when
  // the next begin, so that a kill or a full disk loses 10 s at most.
  TempDir temp;
  BackupQuery query = Query();
  query.end.reset();
  WriterOptions options;
  options.recording = true;
  options.clock = std::make_shared<ManualClock>(0, kT0 + 10 * kMinute);
  RowsReport begun = Resolved();
  begun.end = kT0;
  {
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), query, "test", options);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE((*writer)->Begin(begun).ok());
    for (int second = 0; second < 35; ++second) {  // a report a second, 10 rows each
      StringInterner interner;
      RowBatch batch;
      UnixNanos from = kT0 + second * kNanosPerSecond;
      MakeRows(from, from + kNanosPerSecond, &interner, &batch, kNanosPerSecond / 10);
      ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
    }
    // Killed: no Finish.
  }
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), query, "test", options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  RowsReport later = Resolved();
  later.start = later.end = kT0 + 5 * kMinute;
  ASSERT_TRUE((*writer)->Begin(later).ok());
  ASSERT_TRUE((*writer)->Finish(later).ok());
  VerifyReport report;
  Status verified = VerifyArchive(temp.archive(), &report);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  EXPECT_EQ(report.rows, 30 * 10);  // 30 s committed; the frame of the last 5 s was open
}

// The reference's hardware model of each cluster is written with its catalogue and read back: a
// report from the archive names it as a report from the API does.
TEST(WriterTest, EachClustersHardwareIsKept) {
  TempDir temp;
  RowsReport resolved = Resolved();
  Result<Catalogue> nova = Catalogue::FromJson(R"({"uid":"nova","model":"Dell PowerEdge R430",)"
                                               R"("metrics":[{"name":"wattmetre_power_watt"}]})");
  ASSERT_TRUE(nova.ok());
  resolved.catalogues = {{"lyon/nova", *nova}};
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), Query(), "test");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Begin(resolved).ok());
  ASSERT_TRUE((*writer)->Finish(resolved).ok());
  Result<Manifest> manifest = ReadManifest(temp.archive());
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  ASSERT_EQ(manifest->catalogue.size(), 1u);
  EXPECT_EQ(manifest->catalogue[0].catalogue.model(), "Dell PowerEdge R430");
  EXPECT_EQ(manifest->catalogue[0].catalogue.json(), nova->json());
  Json written = Json::parse(ReadFile(fs::path(temp.archive()) / "manifest.json"));
  EXPECT_EQ(written["hardware"], Json::parse(R"({"lyon/nova": {"model": "Dell PowerEdge R430"}})"));
}

// Defect 3: journal records are outside input.
TEST(WriterTest, AJournalRecordNamingAFileOutsideDataIsNotFollowed) {
  TempDir temp;
  Interrupted(temp.archive());
  AppendFile(fs::path(temp.archive()) / kJournalName,
             R"({"file":"data/../../escaped.jsonl.zst","bytes":0,"rows":0,"frames":0,)"
             R"("next":0,"first":"","last":"","metrics":{}})"
             "\n");
  WriteFile(temp.root() / "victim.jsonl.zst", "precious");
  AppendFile(fs::path(temp.archive()) / kJournalName,
             R"({"file":"data/../../victim.jsonl.zst","bytes":2,"rows":0,"frames":0,)"
             R"("next":0,"first":"","last":"","metrics":{}})"
             "\n");
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), Query(), "test");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
  Status finished = (*writer)->Finish(Resolved());  // whatever it says
  EXPECT_FALSE(fs::exists(temp.root() / "escaped.jsonl.zst"));
  EXPECT_EQ(ReadFile(temp.root() / "victim.jsonl.zst"), "precious");
}

TEST(WriterTest, AJournalRecordWithAMissingOrMistypedFieldIsSkippedNotACrash) {
  for (const char* bad : {R"({"file":"data/nova-1.lyon.grid5000.fr.jsonl.zst","bytes":"12"})",
                          R"({"file":"data/nova-1.lyon.grid5000.fr.jsonl.zst","bytes":1,)"
                          R"("rows":1,"frames":1})",  // no "next"
                          R"({"file":7,"bytes":1,"rows":1,"frames":1,"next":0})",
                          R"({"file":"data/x.jsonl.zst","bytes":-1,"rows":1,"frames":1,"next":0})",
                          R"({"file":"data/x.jsonl.zst","bytes":1e400})", R"([1,2])"}) {
    SCOPED_TRACE(bad);
    TempDir temp;
    Interrupted(temp.archive());
    std::vector<JournalRecord> before = Journal(temp.archive());
    AppendFile(fs::path(temp.archive()) / kJournalName, std::string(bad) + "\n");
    int skipped = 0;
    std::vector<JournalRecord> after =
        ParseJournal(ReadFile(fs::path(temp.archive()) / kJournalName), &skipped);
    EXPECT_EQ(skipped, 1);
    ASSERT_EQ(after.size(), before.size());
    EXPECT_EQ(after[0].bytes, before[0].bytes);
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    EXPECT_TRUE((*writer)->resuming());
  }
}

TEST(WriterTest, AManifestWithoutStartNsIsResumedFromItsStartText) {
  TempDir temp;
  Interrupted(temp.archive());
  fs::path path = fs::path(temp.archive()) / kManifestName;
  Json manifest = Json::parse(ReadFile(path));
  manifest["window"].erase("start_ns");
  manifest["window"].erase("end_ns");
  WriteFile(path, manifest.dump(2));
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), Query(), "test");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  FetchWindow asked;
  asked.start = kT0;
  asked.end = kT0 + 10 * kMinute;
  EXPECT_EQ((*writer)->WindowToRun(asked).end, kT0 + 10 * kMinute);
}

TEST(WriterTest, ADamagedManifestIsCorruptionNotACrash) {
  for (const char* damage : {"window_start_string", "window_empty", "start_ns_string", "huge"}) {
    SCOPED_TRACE(damage);
    TempDir temp;
    Interrupted(temp.archive());
    fs::path path = fs::path(temp.archive()) / kManifestName;
    Json manifest = Json::parse(ReadFile(path));
    std::string text;
    if (std::string(damage) == "window_start_string") {
      manifest["window"]["start"] = 17;
    } else if (std::string(damage) == "window_empty") {
      manifest["window"]["start"] = "";
    } else if (std::string(damage) == "start_ns_string") {
      manifest["window"]["start_ns"] = "1744977600000000000";
    }
    text = manifest.dump(2);
    if (std::string(damage) == "huge") {
      text.replace(text.find("\"start_ns\": ") + 12, 19, "1e400");
    }
    WriteFile(path, text);
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_FALSE(writer.ok());
    EXPECT_EQ(writer.status().code(), Status::Code::kCorruption) << writer.status().ToString();
    EXPECT_NE(writer.status().message().find("manifest.json"), std::string::npos);
  }
}

// Defect 4: what a backup killed at once leaves is a fresh start.
TEST(WriterTest, ItsOwnLeftoversAreAFreshStart) {
  std::string manifest_start = "{\n  \"format\": \"kwatt-archive\",\n  \"format_vers";
  for (const std::string& tmp : {std::string(), std::string("{\n  \"form"), manifest_start}) {
    for (bool journal : {false, true}) {
      TempDir temp;
      fs::create_directories(fs::path(temp.archive()) / kDataDir);
      if (!tmp.empty()) WriteFile(fs::path(temp.archive()) / "manifest.json.tmp", tmp);
      if (journal) WriteFile(fs::path(temp.archive()) / kJournalName, "");
      Result<std::unique_ptr<ArchiveWriter>> writer =
          ArchiveWriter::Open(temp.archive(), Query(), "test");
      ASSERT_TRUE(writer.ok()) << writer.status().ToString();
      EXPECT_FALSE((*writer)->resuming());
      ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
      EXPECT_TRUE(fs::exists(fs::path(temp.archive()) / kManifestName));
    }
  }
}

// Issue 21, item 4: a new archive is written once the query is resolved (Begin), so that a query
// the API refuses leaves nothing behind; a directory Open() made is removed again.
TEST(WriterTest, NothingIsWrittenBeforeTheQueryIsResolved) {
  TempDir temp;
  {
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    EXPECT_TRUE(fs::is_empty(temp.archive()));
  }
  EXPECT_FALSE(fs::exists(temp.archive()));
  fs::create_directories(temp.archive());  // the user's own empty directory stays
  {
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  }
  EXPECT_TRUE(fs::exists(temp.archive()) && fs::is_empty(temp.archive()));
}

// Issue 21, item 1: the API is part of the query a resume must match.
TEST(WriterTest, AResumeFromAnotherApiIsRefused) {
  TempDir temp;
  Interrupted(temp.archive());
  BackupQuery other = Query();
  other.api = "http://127.0.0.1:2/stable";
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), other, "test");
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(writer.status().message().find("from another API (http://127.0.0.1:1/stable"),
            std::string::npos)
      << writer.status().message();
  EXPECT_TRUE(ArchiveWriter::Open(temp.archive(), Query(), "test").ok());
}

// Issue 21, item 2: one writer at a time; readers tell a running backup from an interrupted one.
TEST(WriterTest, ARunningWriterHoldsTheDirectory) {
  TempDir temp;
  {
    Result<std::unique_ptr<ArchiveWriter>> first =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE((*first)->Begin(Resolved()).ok());
    EXPECT_TRUE(BeingWritten(temp.archive()));
    Result<std::unique_ptr<ArchiveWriter>> second =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), Status::Code::kUnavailable);
    Result<Manifest> manifest = ReadManifest(temp.archive());
    ASSERT_TRUE(manifest.ok());
    EXPECT_NE(IncompleteArchiveMessage(*manifest).find("running now"), std::string::npos);
  }
  EXPECT_FALSE(BeingWritten(temp.archive()));
  Result<Manifest> manifest = ReadManifest(temp.archive());
  ASSERT_TRUE(manifest.ok());
  EXPECT_NE(IncompleteArchiveMessage(*manifest).find("Run the same `kwatt backup` command again"),
            std::string::npos);
  EXPECT_TRUE(ArchiveWriter::Open(temp.archive(), Query(), "test").ok());
}

TEST(WriterTest, AnEmptyDirectoryNameIsRefusedNotTheCurrentDirectory) {
  Result<std::unique_ptr<ArchiveWriter>> writer = ArchiveWriter::Open("", Query(), "test");
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(writer.status().message().find("empty"), std::string::npos);
}

TEST(WriterTest, WhatIsNotItsLeftoversIsRefused) {
  {
    TempDir temp;  // a data file with bytes, and no manifest
    fs::create_directories(fs::path(temp.archive()) / kDataDir);
    WriteFile(fs::path(temp.archive()) / NodeFileName(kNova1), "rows");
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_FALSE(writer.ok());
    EXPECT_NE(writer.status().message().find("holds no kwatt archive"), std::string::npos);
  }
  {
    TempDir temp;  // a manifest.json.tmp that is not one of kwatt's
    fs::create_directories(temp.archive());
    WriteFile(fs::path(temp.archive()) / "manifest.json.tmp", "my notes");
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_FALSE(writer.ok());
    EXPECT_EQ(ReadFile(fs::path(temp.archive()) / "manifest.json.tmp"), "my notes");
  }
  {
    TempDir temp;  // another program's manifest.json
    fs::create_directories(temp.archive());
    WriteFile(fs::path(temp.archive()) / kManifestName, R"({"name": "my project"})");
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_FALSE(writer.ok());
    EXPECT_EQ(writer.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(writer.status().message().find("choose another directory"), std::string::npos);
  }
  {
    TempDir temp;  // a journal with records, and no manifest
    fs::create_directories(fs::path(temp.archive()) / kDataDir);
    WriteFile(fs::path(temp.archive()) / kJournalName, "{}\n");
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_FALSE(writer.ok());
  }
}

// Defect 5: the data files must hold what the journal says was committed.
TEST(WriterTest, ADataFileShorterThanTheJournalIsRefusedNotGrownWithZeros) {
  for (const char* damage : {"truncated", "deleted", "flipped"}) {
    SCOPED_TRACE(damage);
    TempDir temp;
    Interrupted(temp.archive());
    fs::path data = fs::path(temp.archive()) / NodeFileName(kNova1);
    std::string bytes = ReadFile(data);
    ASSERT_FALSE(bytes.empty());
    if (std::string(damage) == "truncated") {
      fs::resize_file(data, bytes.size() / 2);
    } else if (std::string(damage) == "deleted") {
      fs::remove(data);
    } else {
      bytes[bytes.size() / 2] ^= 0x20;
      WriteFile(data, bytes);
    }
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test");
    ASSERT_FALSE(writer.ok());
    EXPECT_EQ(writer.status().code(), Status::Code::kCorruption) << writer.status().ToString();
    EXPECT_NE(writer.status().message().find(NodeFileName(kNova1)), std::string::npos)
        << writer.status().ToString();
    EXPECT_NE(writer.status().message().find("new directory"), std::string::npos);
    if (std::string(damage) == "deleted") {
      EXPECT_FALSE(fs::exists(data));
    }
    if (std::string(damage) == "truncated") {
      EXPECT_EQ(fs::file_size(data), bytes.size() / 2);
    }
  }
}

TEST(WriterTest, BytesAfterTheCommittedPartAreCutOnResume) {
  TempDir temp;
  Interrupted(temp.archive());
  fs::path data = fs::path(temp.archive()) / NodeFileName(kNova1);
  AppendFile(data, "half a frame that the crash left");
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), Query(), "test");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
  EXPECT_EQ(int64_t(fs::file_size(data)), Journal(temp.archive())[0].bytes);
}

// Defect 7: a window that ends after now is not complete.
TEST(WriterTest, AWindowEndingAfterNowStaysIncompleteAndResumable) {
  TempDir temp;
  // The wall clock reads its monotonic time: now kT0 + 5 min (the window ends at kT0 + 10 min).
  auto clock = std::make_shared<ManualClock>(kT0 + 5 * kMinute, 0);
  WriterOptions options;
  options.clock = clock;
  {
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), Query(), "test", options);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
    StringInterner interner;
    RowBatch batch;
    MakeRows(kT0, kT0 + 5 * kMinute, &interner, &batch);
    ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
    Status finished = (*writer)->Finish(Resolved());
    EXPECT_EQ(finished.code(), Status::Code::kIncomplete) << finished.ToString();
    EXPECT_NE(finished.message().find("after now"), std::string::npos) << finished.ToString();
    EXPECT_NE(finished.message().find(FormatUtcTimestamp(kT0 + 10 * kMinute)), std::string::npos)
        << finished.ToString();
  }
  Result<Manifest> manifest = ReadManifest(temp.archive());
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_FALSE(manifest->complete);

  clock->Jump(kT0 + 11 * kMinute);
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), Query(), "test", options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_FALSE((*writer)->already_complete());
  EXPECT_TRUE((*writer)->resuming());
  ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
  StringInterner interner;
  RowBatch batch;
  MakeRows(kT0, kT0 + 10 * kMinute, &interner, &batch);
  ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
  Status finished = (*writer)->Finish(Resolved());
  EXPECT_TRUE(finished.ok()) << finished.ToString();
  VerifyReport report;
  EXPECT_TRUE(VerifyArchive(temp.archive(), &report).ok());
  EXPECT_EQ(report.rows, 10 * 60 * 100);
}

// A job that has not ended: its window is taken up to now; the archive stays incomplete, and a
// run after the job's end extends the window to it and completes the archive, with the bytes of
// a backup taken after the end.
TEST(WriterTest, ARunningJobStaysIncompleteUntilItEnds) {
  BackupQuery query;
  query.api = "http://127.0.0.1:1/stable";
  query.job = BackupJob{"lyon", 1001};
  auto clock = std::make_shared<ManualClock>(kT0 + 3 * kMinute + 30 * kNanosPerSecond, 0);
  WriterOptions options;
  options.clock = clock;
  RowsReport running = Resolved();
  running.end = clock->WallNanos();  // what the fetch resolves for a job without stopped_at
  TempDir temp;
  {
    Result<std::unique_ptr<ArchiveWriter>> writer =
        ArchiveWriter::Open(temp.archive(), query, "test", options);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Begin(running).ok());
    StringInterner interner;
    RowBatch batch;
    MakeRows(kT0, clock->WallNanos(), &interner, &batch);
    ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
    clock->Jump(clock->MonotonicNanos() + kNanosPerSecond);
    Status finished = (*writer)->Finish(running);
    EXPECT_EQ(finished.code(), Status::Code::kIncomplete) << finished.ToString();
    EXPECT_NE(finished.message().find("job lyon:1001 has not ended"), std::string::npos)
        << finished.ToString();
  }
  Result<Manifest> manifest = ReadManifest(temp.archive());
  ASSERT_TRUE(manifest.ok());
  EXPECT_FALSE(manifest->complete);

  clock->Jump(kT0 + 20 * kMinute);  // the job ended at kT0 + 10 min
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), query, "test", options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->resuming());
  FetchWindow asked;  // the job's, resolved by the fetch
  FetchWindow to_run = (*writer)->WindowToRun(asked);
  EXPECT_FALSE(to_run.end.has_value());  // the job is resolved again
  ASSERT_TRUE(to_run.start.has_value());
  ASSERT_EQ(Journal(temp.archive()).size(), 1u);
  EXPECT_EQ(*to_run.start, Journal(temp.archive())[0].next);  // after the committed frames
  EXPECT_GT(*to_run.start, kT0);
  ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
  StringInterner interner;
  RowBatch batch;
  MakeRows(*to_run.start, kT0 + 10 * kMinute, &interner, &batch);
  ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
  Status finished = (*writer)->Finish(Resolved());
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  manifest = ReadManifest(temp.archive());
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->window_end, kT0 + 10 * kMinute);

  // The same bytes as a backup taken after the job's end.
  TempDir reference;
  Result<std::unique_ptr<ArchiveWriter>> whole =
      ArchiveWriter::Open(reference.archive(), query, "test", options);
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE((*whole)->Begin(Resolved()).ok());
  StringInterner interner2;
  RowBatch all;
  MakeRows(kT0, kT0 + 10 * kMinute, &interner2, &all);
  ASSERT_TRUE((*whole)->Write("lyon", all, interner2).ok());
  ASSERT_TRUE((*whole)->Finish(Resolved()).ok());
  EXPECT_EQ(ReadFile(fs::path(temp.archive()) / NodeFileName(kNova1)),
            ReadFile(fs::path(reference.archive()) / NodeFileName(kNova1)));
  VerifyReport report;
  EXPECT_TRUE(VerifyArchive(temp.archive(), &report).ok());
}

// A minute that holds more text than a frame may: the frame closes before a later instant.
TEST(WriterTest, NoFrameHoldsMoreThanTheFormatAllows) {
  TempDir temp;
  Result<std::unique_ptr<ArchiveWriter>> writer =
      ArchiveWriter::Open(temp.archive(), Query(), "test");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Begin(Resolved()).ok());
  StringInterner interner;
  RowBatch batch;
  MakeRows(kT0, kT0 + kMinute, &interner, &batch, 250'000);  // 240,000 rows, about 45 MB
  ASSERT_GT(batch.raw.size(), kMaxFrameTextBytes / 2 + (1 << 20));
  ASSERT_TRUE((*writer)->Write("lyon", batch, interner).ok());
  ASSERT_TRUE((*writer)->Finish(Resolved()).ok());
  Result<Manifest> manifest = ReadManifest(temp.archive());
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->files[0].frames, 2);
  VerifyReport report;
  Status verified = VerifyArchive(temp.archive(), &report);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  EXPECT_EQ(report.rows, 240'000);
}

}  // namespace
}  // namespace kwatt::archive::writer_test

// The archive reader against archives built here by hand from doc/archive_format.md (JSON Lines,
// zstd frames with content size and checksum, XXH64, an nlohmann-written manifest): this checks
// the reader and, independently of the writer, the spec.
#include "kwatt/archive/reader.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kwatt/archive/format.h"
#include "kwatt/core/time.h"
#include "src/testing/archive_files.h"

namespace kwatt::archive::reader_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr UnixNanos kT0 = 1744977600LL * kNanosPerSecond;  // 2025-04-18T12:00:00Z

// A row as Kwollect renders it.
std::string MakeRow(const std::string& uid, const std::string& metric, UnixNanos t, double value,
                    const std::string& labels = "{}") {
  std::ostringstream row;
  row << R"({"timestamp":")" << FormatParisTimestamp(t) << R"(","device_id":")" << uid
      << R"(","metric_id":")" << metric << R"(","value":)" << value << R"(,"labels":)" << labels
      << "}";
  return row.str();
}

std::string Compress(const std::string& text, bool checksum = true, bool content_size = true) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, kZstdLevel);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
  std::string out(ZSTD_compressBound(text.size()), '\0');
  size_t n;
  if (content_size) {
    n = ZSTD_compress2(cctx, out.data(), out.size(), text.data(), text.size());
  } else {
    // Streamed without a pledged size: the header then has no content size.
    ZSTD_inBuffer in{text.data(), text.size(), 0};
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    n = ZSTD_compressStream2(cctx, &o, &in, ZSTD_e_end);
    EXPECT_EQ(n, 0u);
    n = o.pos;
  }
  EXPECT_FALSE(ZSTD_isError(n));
  ZSTD_freeCCtx(cctx);
  out.resize(n);
  return out;
}

std::string Hex64(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)v);
  return text;
}

using test_files::ReadFile;
using test_files::WriteFile;

struct NodeData {
  std::string fqdn;  // "" for an _other file
  std::string site;
  std::vector<std::string> rows;
  size_t rows_per_frame = 0;  // 0: one frame
};

// Builds an archive directory per doc/archive_format.md.
class ArchiveBuilder {
 public:
  ArchiveBuilder() {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("kwatt_reader_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
  }
  ~ArchiveBuilder() { fs::remove_all(dir_); }

  std::string dir() const { return dir_.string(); }
  fs::path path(const std::string& rel) const { return dir_ / rel; }

  void Add(NodeData node) { nodes_.push_back(std::move(node)); }

  // Writes the data files and a complete manifest.
  void Write() {
    Json files = Json::array(), nodes = Json::array(), sites = Json::array();
    for (const NodeData& node : nodes_) {
      std::string rel = node.fqdn.empty() ? OtherFileName(node.site) : NodeFileName(node.fqdn);
      std::string bytes;
      int frames = 0;
      size_t per =
          node.rows_per_frame ? node.rows_per_frame : std::max<size_t>(1, node.rows.size());
      for (size_t i = 0; i < node.rows.size(); i += per) {
        std::string text;
        for (size_t k = i; k < std::min(node.rows.size(), i + per); ++k) {
          text += node.rows[k] + "\n";
        }
        bytes += Compress(text);
        ++frames;
      }
      WriteFile(dir_ / rel, bytes);
      Json metrics = Json::object();
      for (const std::string& row : node.rows) {
        std::string metric = Json::parse(row)["metric_id"];
        metrics[metric] = metrics.value(metric, 0) + 1;
      }
      Json entry;
      entry["path"] = rel;
      entry["node"] = node.fqdn.empty() ? Json(nullptr) : Json(node.fqdn);
      entry["rows"] = node.rows.size();
      entry["bytes"] = bytes.size();
      entry["frames"] = frames;
      entry["xxh64"] = Hex64(XXH64(bytes.data(), bytes.size(), 0));
      entry["first"] =
          node.rows.empty() ? Json(nullptr) : Json::parse(node.rows.front())["timestamp"];
      entry["last"] =
          node.rows.empty() ? Json(nullptr) : Json::parse(node.rows.back())["timestamp"];
      entry["metrics"] = metrics;
      files.push_back(entry);
      if (!node.fqdn.empty()) {
        std::string uid = node.fqdn.substr(0, node.fqdn.find('.'));
        nodes.push_back({{"node", node.fqdn},
                         {"uid", uid},
                         {"site", node.site},
                         {"cluster", uid.substr(0, uid.find('-'))},
                         {"file", rel}});
      }
      if (std::find(sites.begin(), sites.end(), node.site) == sites.end()) {
        sites.push_back(node.site);
      }
    }
    Json query_nodes = Json::array();
    for (const Json& node : nodes) query_nodes.push_back(node["node"]);
    manifest_ = Json::object();
    manifest_["format"] = "kwatt-archive";
    manifest_["format_version"] = 1;
    manifest_["kwatt_version"] = "0.1.0";
    manifest_["state"] = "complete";
    manifest_["created_at"] = "2026-11-29T21:00:00Z";
    manifest_["completed_at"] = "2026-11-29T21:00:07Z";
    manifest_["query"] = {{"api", "https://api.grid5000.fr/stable"},
                          {"nodes", query_nodes},
                          {"start", "1744977600.000000"},
                          {"end", "1744979400.000000"},
                          {"job", nullptr},
                          {"metrics", Json::array()},
                          {"summary", false}};
    manifest_["window"] = {{"start", "2025-04-18T12:00:00Z"}, {"end", "2025-04-18T12:30:00Z"}};
    manifest_["sites"] = sites;
    manifest_["job_types"] = Json::array({"monitor=wattmetre_power_watt"});
    manifest_["nodes"] = nodes;
    manifest_["catalogue"] = {
        {"lyon/nova", Json::array({{{"name", "wattmetre_power_watt"}, {"period", 20}},
                                   {{"name", "bmc_node_power_watt"}, {"period", 5000}},
                                   {{"name", "prom_node_load1"}, {"period", 15000}}})}};
    manifest_["files"] = files;
    manifest_["fetch"] = {{"requests", 8}, {"retries", 1}, {"splits", 0}, {"seconds", 1.25}};
    WriteManifest();
  }

  Json& manifest() { return manifest_; }
  Json& file_entry(size_t i) { return manifest_["files"][i]; }
  void WriteManifest() { WriteFile(dir_ / "manifest.json", manifest_.dump(2) + "\n"); }
  // Recomputes the hash and size of a file after it was changed on purpose.
  void Rehash(size_t i) {
    std::string bytes = ReadFile(dir_ / file_entry(i)["path"].get<std::string>());
    file_entry(i)["bytes"] = bytes.size();
    file_entry(i)["xxh64"] = Hex64(XXH64(bytes.data(), bytes.size(), 0));
    WriteManifest();
  }

 private:
  fs::path dir_;
  std::vector<NodeData> nodes_;
  Json manifest_;
};

const char kNova1[] = "nova-1.lyon.grid5000.fr";
const char kNova2[] = "nova-2.lyon.grid5000.fr";
const char kWatt[] = "wattmetre_power_watt";
const char kBmc[] = "bmc_node_power_watt";

// nova-1: 300 wattmeter rows (every 50 ms) and 3 BMC rows, several frames; nova-2: 100 rows;
// _other.lyon: 2 rows of a PDU.
void BuildStandard(ArchiveBuilder* b, size_t rows_per_frame = 64) {
  NodeData n1{kNova1, "lyon", {}, rows_per_frame};
  for (int i = 0; i < 300; ++i) {
    UnixNanos t = kT0 + i * 50 * kNanosPerMilli;
    n1.rows.push_back(MakeRow("nova-1", kWatt, t, 100 + i % 7 + 0.25,
                              R"({"_device_orig":["wattmetre1-port6"]})"));
    if (i % 100 == 0) n1.rows.push_back(MakeRow("nova-1", kBmc, t, 98));
  }
  NodeData n2{kNova2, "lyon", {}, rows_per_frame};
  for (int i = 0; i < 100; ++i) {
    n2.rows.push_back(MakeRow("nova-2", kWatt, kT0 + i * 50 * kNanosPerMilli, 150.5));
  }
  NodeData other{"", "lyon", {}, 0};
  other.rows.push_back(MakeRow("pdu-1", "pdu_outlet_power_watt", kT0, 12));
  other.rows.push_back(MakeRow("pdu-1", "pdu_outlet_power_watt", kT0 + kNanosPerSecond, 13));
  b->Add(n1);
  b->Add(n2);
  b->Add(other);
  b->Write();
}

// Every row's text, file by file, from the data files themselves (zstd -d | split lines).
std::vector<std::string> ExpectedRows(const ArchiveBuilder& b, const Json& manifest) {
  std::vector<std::string> rows;
  for (const Json& file : manifest["files"]) {
    std::string bytes = ReadFile(b.path(file["path"].get<std::string>()));
    std::string text(64 << 20, '\0');
    size_t n = ZSTD_decompress(text.data(), text.size(), bytes.data(), bytes.size());
    EXPECT_FALSE(ZSTD_isError(n));
    text.resize(n);
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) rows.push_back(line);
  }
  return rows;
}

std::vector<std::string> RawRows(const RowBatch& batch) {
  std::vector<std::string> rows;
  for (size_t i = 0; i < batch.size(); ++i) rows.emplace_back(batch.RawRow(i));
  return rows;
}

// Every row the streaming reader gives, with the file of each.
struct Streamed {
  Status status;
  std::vector<std::string> rows;
  std::vector<std::string> files;
};
Streamed Stream(const std::string& dir, const LoadOptions& options) {
  Streamed out;
  Result<std::unique_ptr<ArchiveReader>> reader = ArchiveReader::Open(dir, options);
  if (!reader.ok()) {
    out.status = reader.status();
    return out;
  }
  RowBatch batch;
  while ((*reader)->Next(&batch)) {
    EXPECT_FALSE(batch.empty());
    for (size_t i = 0; i < batch.size(); ++i) {
      out.rows.emplace_back(batch.RawRow(i));
      out.files.push_back((*reader)->current_file().path);
      // Columns agree with the text.
      Json row = Json::parse(batch.RawRow(i));
      EXPECT_EQ((*reader)->interner().Get(batch.device[i]), row["device_id"].get<std::string>());
      EXPECT_EQ((*reader)->interner().Get(batch.metric[i]), row["metric_id"].get<std::string>());
    }
  }
  out.status = (*reader)->status();
  EXPECT_EQ((*reader)->rows(), int64_t(out.rows.size()));
  return out;
}

struct Loaded {
  Status status;
  StringInterner interner;
  RowBatch batch;
  LoadReport report;
};
std::unique_ptr<Loaded> Load(const std::string& dir, const LoadOptions& options) {
  auto out = std::make_unique<Loaded>();
  out->status = LoadArchive(dir, options, &out->interner, &out->batch, &out->report);
  return out;
}

// The same error from LoadArchive, ArchiveReader and (for damage) VerifyArchive, each naming
// `parts`.
void ExpectError(const std::string& dir, Status::Code code, const std::vector<std::string>& parts,
                 const LoadOptions& options = {}, bool verify_too = true) {
  auto check = [&](const Status& status, const char* who) {
    ASSERT_EQ(status.code(), code) << who << ": " << status.ToString();
    for (const std::string& part : parts) {
      EXPECT_NE(status.message().find(part), std::string::npos)
          << who << ": \"" << part << "\" not in: " << status.message();
    }
  };
  auto loaded = Load(dir, options);
  check(loaded->status, "LoadArchive");
  EXPECT_TRUE(loaded->batch.empty());
  check(Stream(dir, options).status, "ArchiveReader");
  if (verify_too) {
    VerifyReport report;
    check(VerifyArchive(dir, &report), "VerifyArchive");
  }
}

TEST(ArchiveReader, ReadsTheManifest) {
  ArchiveBuilder b;
  BuildStandard(&b);
  Result<Manifest> m = ReadManifest(b.dir());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format_version, 1);
  EXPECT_EQ(m->kwatt_version, "0.1.0");
  EXPECT_TRUE(m->complete);
  EXPECT_EQ(m->completed_at, "2026-11-29T21:00:07Z");
  EXPECT_EQ(m->query.api, "https://api.grid5000.fr/stable");
  EXPECT_EQ(m->query.nodes, (std::vector<std::string>{kNova1, kNova2}));
  EXPECT_EQ(m->query.start, "1744977600.000000");
  EXPECT_TRUE(m->query.job_site.empty());
  ASSERT_TRUE(m->has_window);
  EXPECT_EQ(m->window_start, kT0);
  EXPECT_EQ(m->window_end, kT0 + 1800 * kNanosPerSecond);
  EXPECT_EQ(m->sites, std::vector<std::string>{"lyon"});
  EXPECT_EQ(m->job_types, std::vector<std::string>{"monitor=wattmetre_power_watt"});
  ASSERT_EQ(m->nodes.size(), 2u);
  EXPECT_EQ(m->nodes[1].uid, "nova-2");
  EXPECT_EQ(m->nodes[1].cluster, "nova");
  ASSERT_EQ(m->catalogue.size(), 1u);
  EXPECT_EQ(m->catalogue[0].cluster, "lyon/nova");
  EXPECT_EQ(m->catalogue[0].catalogue.entries()[0].name, kWatt);
  ASSERT_EQ(m->files.size(), 3u);
  EXPECT_EQ(m->files[0].node, kNova1);
  EXPECT_EQ(m->files[0].site, "lyon");
  EXPECT_EQ(m->files[0].rows, 303);
  EXPECT_EQ(m->files[0].frames, 5);  // 303 rows, 64 per frame
  EXPECT_EQ(m->files[0].metrics,
            (std::vector<std::pair<std::string, int64_t>>{{kWatt, 300}, {kBmc, 3}}));
  EXPECT_EQ(m->files[0].first, FormatParisTimestamp(kT0));
  EXPECT_EQ(m->files[2].path, "data/_other.lyon.jsonl.zst");
  EXPECT_EQ(m->files[2].node, "");
  EXPECT_EQ(m->files[2].site, "lyon");
  EXPECT_EQ(m->rows(), 405);
  ASSERT_TRUE(m->fetch.has_value());
  EXPECT_EQ(m->fetch->retries, 1);
  EXPECT_EQ(m->fetch->seconds, 1.25);
  EXPECT_EQ(m->MetricRows().size(), 3u);
  EXPECT_FALSE(m->has_journal);
}

TEST(ArchiveReader, LoadGivesEveryRowExactlyInOrder) {
  ArchiveBuilder b;
  BuildStandard(&b);
  std::vector<std::string> expected = ExpectedRows(b, b.manifest());
  ASSERT_EQ(expected.size(), 405u);
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE(threads);
    LoadOptions options;
    options.threads = threads;
    auto loaded = Load(b.dir(), options);
    ASSERT_TRUE(loaded->status.ok()) << loaded->status.ToString();
    EXPECT_EQ(RawRows(loaded->batch), expected);
    const RowBatch& batch = loaded->batch;
    // Columns.
    EXPECT_EQ(batch.time[0], kT0);
    EXPECT_EQ(batch.utc_offset[0], 7200);
    EXPECT_EQ(loaded->interner.Get(batch.device[0]), "nova-1");
    EXPECT_EQ(loaded->interner.Get(batch.metric[0]), kWatt);
    EXPECT_EQ(loaded->interner.Get(batch.labels[0]), R"({"_device_orig":["wattmetre1-port6"]})");
    EXPECT_EQ(batch.value[0], 100.25);
    for (size_t i = 0; i < batch.size(); ++i) {
      Json row = Json::parse(expected[i]);
      ASSERT_EQ(loaded->interner.Get(batch.device[i]), row["device_id"].get<std::string>());
      ASSERT_EQ(loaded->interner.Get(batch.metric[i]), row["metric_id"].get<std::string>());
      ASSERT_EQ(batch.value[i], row["value"].get<double>());
    }
    // Ids do not depend on the thread count: first appearance in row order.
    EXPECT_EQ(batch.device[0], 0u);
    EXPECT_EQ(batch.metric[0], 1u);
    // Where each file's rows went.
    const LoadReport& report = loaded->report;
    EXPECT_TRUE(report.complete);
    ASSERT_EQ(report.files.size(), 3u);
    EXPECT_EQ(report.files[0].node, kNova1);
    EXPECT_EQ(report.files[0].begin, 0u);
    EXPECT_EQ(report.files[0].end, 303u);
    EXPECT_EQ(report.files[1].begin, 303u);
    EXPECT_EQ(report.files[2].site, "lyon");
    EXPECT_EQ(report.files[2].end, 405u);
    EXPECT_EQ(report.rows, 405);
    EXPECT_EQ(report.rows_read, 405);
  }
  // Streaming: the same rows, each with its file.
  Streamed streamed = Stream(b.dir(), {});
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.ToString();
  EXPECT_EQ(streamed.rows, expected);
  EXPECT_EQ(streamed.files.front(), NodeFileName(kNova1));
  EXPECT_EQ(streamed.files.back(), OtherFileName("lyon"));
  // The archive is intact.
  VerifyReport report;
  Status verified = VerifyArchive(b.dir(), &report);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  EXPECT_TRUE(report.problems.empty());
  EXPECT_EQ(report.files, 3);
  EXPECT_EQ(report.rows, 405);
  EXPECT_TRUE(report.complete);
}

TEST(ArchiveReader, AppendsToATableAndCanDropTheText) {
  ArchiveBuilder b;
  BuildStandard(&b);
  StringInterner interner;
  RowBatch batch;
  ASSERT_TRUE(LoadArchive(b.dir(), {}, &interner, &batch).ok());
  LoadReport report;
  ASSERT_TRUE(LoadArchive(b.dir(), {}, &interner, &batch, &report).ok());
  ASSERT_EQ(batch.size(), 810u);
  EXPECT_EQ(batch.RawRow(405), batch.RawRow(0));
  EXPECT_EQ(batch.device[405], batch.device[0]);
  EXPECT_EQ(report.files[0].begin, 405u);

  LoadOptions options;
  options.keep_raw = false;
  StringInterner interner2;
  RowBatch columns;
  ASSERT_TRUE(LoadArchive(b.dir(), options, &interner2, &columns).ok());
  ASSERT_EQ(columns.size(), 405u);
  EXPECT_TRUE(columns.raw.empty());
  EXPECT_TRUE(columns.raw_end.empty());
  EXPECT_EQ(std::vector<UnixNanos>(batch.time.begin(), batch.time.begin() + 405), columns.time);
}

TEST(ArchiveReader, FailedLoadLeavesTheTableAsItWas) {
  ArchiveBuilder good, bad;
  BuildStandard(&good);
  BuildStandard(&bad);
  bad.file_entry(1)["rows"] = 99;  // found once nova-1's rows are in the table
  bad.WriteManifest();
  for (bool keep_raw : {true, false}) {
    for (int threads : {1, 2}) {
      StringInterner interner;
      RowBatch batch;
      LoadOptions options;
      options.keep_raw = keep_raw;
      options.threads = threads;
      ASSERT_TRUE(LoadArchive(good.dir(), options, &interner, &batch).ok());
      RowBatch before = batch;
      Status status = LoadArchive(bad.dir(), options, &interner, &batch);
      ASSERT_EQ(status.code(), Status::Code::kCorruption) << status.ToString();
      EXPECT_EQ(batch.time, before.time);
      EXPECT_EQ(batch.device, before.device);
      EXPECT_EQ(batch.labels, before.labels);
      EXPECT_EQ(batch.raw, before.raw);
      EXPECT_EQ(batch.raw_end, before.raw_end);
    }
  }
}

// Issue 21, items 16 and 21: a thread count out of range is refused (100000 threads aborted a
// Python kernel); a load asked to stop (Ctrl-C in Python) stops at the next frame, its table as
// it was.
TEST(ArchiveReader, LoadRefusesAbsurdThreadsAndStopsWhenAsked) {
  ArchiveBuilder b;
  BuildStandard(&b);
  for (int threads : {-1, kMaxLoadThreads + 1, 100000}) {
    StringInterner interner;
    RowBatch batch;
    LoadOptions options;
    options.threads = threads;
    Status status = LoadArchive(b.dir(), options, &interner, &batch);
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << threads;
    EXPECT_NE(status.message().find("threads must be 0"), std::string::npos);
  }
  StringInterner interner;
  RowBatch batch;
  LoadOptions options;
  int asked = 0;
  options.cancelled = [&asked] { return ++asked >= 2; };  // stop before the second frame
  Status status = LoadArchive(b.dir(), options, &interner, &batch);
  EXPECT_EQ(status.code(), Status::Code::kIncomplete) << status.ToString();
  EXPECT_EQ(status.message(), "interrupted");
  EXPECT_EQ(asked, 2);
  EXPECT_TRUE(batch.empty());
}

TEST(ArchiveReader, ColumnsWithoutTextAndFilters) {
  ArchiveBuilder b;
  BuildStandard(&b);
  StringInterner full_interner;
  RowBatch full;
  ASSERT_TRUE(LoadArchive(b.dir(), {}, &full_interner, &full).ok());
  for (bool filtered : {false, true}) {
    LoadOptions options;
    options.keep_raw = false;
    if (filtered) options.metrics = {kWatt};
    StringInterner interner;
    RowBatch batch;
    LoadReport report;
    ASSERT_TRUE(LoadArchive(b.dir(), options, &interner, &batch, &report).ok());
    EXPECT_TRUE(batch.raw.empty());
    EXPECT_TRUE(batch.raw_end.empty());
    std::vector<double> expected;
    for (size_t i = 0; i < full.size(); ++i) {
      if (!filtered || full_interner.Get(full.metric[i]) == kWatt) {
        expected.push_back(full.value[i]);
      }
    }
    EXPECT_EQ(batch.value, expected);
    EXPECT_EQ(report.rows, int64_t(expected.size()));
    EXPECT_EQ(report.rows_read, filtered ? 403 : 405);  // filtered: the PDU file is not read
  }
}

TEST(ArchiveReader, Filters) {
  ArchiveBuilder b;
  BuildStandard(&b);
  std::vector<std::string> all = ExpectedRows(b, b.manifest());
  auto select = [&](auto keep) {
    std::vector<std::string> rows;
    for (const std::string& row : all) {
      if (keep(Json::parse(row))) rows.push_back(row);
    }
    return rows;
  };
  auto instant = [](const Json& row) {
    return ParseIsoTimestamp(row["timestamp"].get<std::string>())->utc;
  };
  struct Case {
    LoadOptions options;
    std::vector<std::string> expected;
  };
  std::vector<Case> cases;
  {
    LoadOptions o;
    o.nodes = {"nova-2.lyon"};
    cases.push_back({o, select([](const Json& r) { return r["device_id"] == "nova-2"; })});
  }
  {
    LoadOptions o;
    o.nodes = {kNova2, "nova-1.lyon"};  // manifest order, whatever the option's
    cases.push_back({o, select([](const Json& r) {
                       return r["device_id"] == "nova-1" || r["device_id"] == "nova-2";
                     })});
  }
  {
    LoadOptions o;
    o.metrics = {kBmc};
    cases.push_back({o, select([](const Json& r) { return r["metric_id"] == kBmc; })});
  }
  {
    LoadOptions o;  // inclusive bounds, to the nanosecond
    o.start = kT0 + 100 * 50 * kNanosPerMilli;
    o.end = kT0 + 120 * 50 * kNanosPerMilli;
    cases.push_back(
        {o, select([&](const Json& r) { return instant(r) >= *o.start && instant(r) <= *o.end; })});
  }
  {
    LoadOptions o;
    o.nodes = {kNova1};
    o.metrics = {kWatt, kBmc};
    o.end = kT0;
    cases.push_back({o, select([&](const Json& r) {
                       return r["device_id"] == "nova-1" && instant(r) <= kT0;
                     })});
  }
  {
    LoadOptions o;  // a catalogue metric without rows: no row, no error
    o.metrics = {"prom_node_load1"};
    cases.push_back({o, {}});
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_FALSE(cases[i].expected.empty() && i != cases.size() - 1);
    auto loaded = Load(b.dir(), cases[i].options);
    ASSERT_TRUE(loaded->status.ok()) << loaded->status.ToString();
    EXPECT_EQ(RawRows(loaded->batch), cases[i].expected);
    Streamed streamed = Stream(b.dir(), cases[i].options);
    ASSERT_TRUE(streamed.status.ok()) << streamed.status.ToString();
    EXPECT_EQ(streamed.rows, cases[i].expected);
  }
  {
    LoadOptions o;
    o.nodes = {"nova-3.lyon"};
    ExpectError(b.dir(), Status::Code::kNotFound,
                {"node nova-3.lyon.grid5000.fr is not in the archive", kNova1}, o, false);
  }
  {
    LoadOptions o;
    o.metrics = {"wattmetre_power_wat"};
    ExpectError(b.dir(), Status::Code::kNotFound,
                {"metric wattmetre_power_wat is not in the archive", kWatt}, o, false);
  }
  {
    LoadOptions o;
    o.start = kT0 + 1;
    o.end = kT0;
    ExpectError(b.dir(), Status::Code::kInvalidArgument, {"is after the end"}, o, false);
  }
  {
    LoadOptions o;
    o.nodes = {"nova-1"};
    ExpectError(b.dir(), Status::Code::kInvalidArgument, {"nova-1"}, o, false);
  }
}

// An interrupted backup: the manifest says incomplete, the journal records committed frames, the
// data files hold a partial frame after them.
TEST(ArchiveReader, IncompleteArchiveIsRefusedUnlessAllowed) {
  ArchiveBuilder b;
  BuildStandard(&b);
  Json& m = b.manifest();
  // nova-1: 2 of its 5 frames committed; nova-2 nothing; then junk (a frame being written).
  std::string n1 = ReadFile(b.path(NodeFileName(kNova1)));
  size_t two_frames = ZSTD_findFrameCompressedSize(n1.data(), n1.size());
  two_frames += ZSTD_findFrameCompressedSize(n1.data() + two_frames, n1.size() - two_frames);
  WriteFile(b.path(NodeFileName(kNova1)), n1.substr(0, two_frames + 17));
  WriteFile(b.path(NodeFileName(kNova2)), "partial");
  fs::remove(b.path(OtherFileName("lyon")));
  std::string journal =
      Json({{"file", NodeFileName(kNova1)},
            {"bytes", 999},
            {"rows", 64},
            {"frames", 1},
            {"next", 1}})
          .dump() +
      "\n" + "not json\n" +
      Json({{"file", NodeFileName(kNova1)},
            {"bytes", two_frames},
            {"rows", 128},
            {"frames", 2},
            {"next", 2}})
          .dump() +
      "\n" + R"({"file":"data/nova-2.lyon.grid5000.fr.jsonl.zst","bytes":4)";  // cut by a crash
  WriteFile(b.path("journal.jsonl"), journal);
  m["state"] = "incomplete";
  m.erase("files");
  m.erase("fetch");
  m.erase("completed_at");
  b.WriteManifest();

  ExpectError(b.dir(), Status::Code::kIncomplete,
              {b.dir() + " is an incomplete archive", "Run the same `kwatt backup` command again",
               "--allow-incomplete"},
              {}, /*verify_too=*/false);

  Result<Manifest> manifest = ReadManifest(b.dir());
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_FALSE(manifest->complete);
  EXPECT_TRUE(manifest->has_journal);
  ASSERT_EQ(manifest->files.size(), 2u);  // the nodes' files; nothing committed of _other
  EXPECT_EQ(manifest->files[0].rows, 128);
  EXPECT_EQ(manifest->files[0].frames, 2);
  EXPECT_EQ(manifest->files[1].rows, 0);

  LoadOptions allow;
  allow.allow_incomplete = true;
  auto loaded = Load(b.dir(), allow);
  ASSERT_TRUE(loaded->status.ok()) << loaded->status.ToString();
  EXPECT_FALSE(loaded->report.complete);
  std::vector<std::string> all = ExpectedRows(b, Json{{"files", Json::array()}});
  std::vector<std::string> committed;
  {
    std::string part = n1.substr(0, two_frames);
    std::string text(1 << 20, '\0');
    text.resize(ZSTD_decompress(text.data(), text.size(), part.data(), part.size()));
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) committed.push_back(line);
  }
  ASSERT_EQ(committed.size(), 128u);
  EXPECT_EQ(RawRows(loaded->batch), committed);
  Streamed streamed = Stream(b.dir(), allow);
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.ToString();
  EXPECT_EQ(streamed.rows, committed);
  // Verify checks the committed part, and says the archive is incomplete.
  VerifyReport report;
  Status verified = VerifyArchive(b.dir(), &report);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  EXPECT_FALSE(report.complete);
  EXPECT_EQ(report.rows, 128);

  // A committed part cut short is damage.
  WriteFile(b.path(NodeFileName(kNova1)), n1.substr(0, two_frames - 1));
  ExpectError(b.dir(), Status::Code::kCorruption,
              {NodeFileName(kNova1), "truncated", "the journal records"}, allow);
}

TEST(ArchiveReader, TruncatedDataFile) {
  ArchiveBuilder b;
  BuildStandard(&b);
  std::string bytes = ReadFile(b.path(NodeFileName(kNova2)));
  WriteFile(b.path(NodeFileName(kNova2)), bytes.substr(0, bytes.size() - 100));
  ExpectError(b.dir(), Status::Code::kCorruption,
              {"is damaged", NodeFileName(kNova2), "truncated",
               std::to_string(bytes.size() - 100) + " bytes, the manifest records " +
                   std::to_string(bytes.size())});
  // Cut, and the manifest made to agree (size and hash): zstd says the frame is not whole.
  b.Rehash(1);
  ExpectError(b.dir(), Status::Code::kCorruption,
              {NodeFileName(kNova2), "zstd frame 2", "truncated: the file ends inside the frame"});
  // A whole frame removed (the manifest agreeing on size and hash): frames and rows differ.
  size_t first = ZSTD_findFrameCompressedSize(bytes.data(), bytes.size());
  WriteFile(b.path(NodeFileName(kNova2)), bytes.substr(0, first));
  b.Rehash(1);
  ExpectError(b.dir(), Status::Code::kCorruption,
              {NodeFileName(kNova2), "1 zstd frames, the manifest records 2"});
}

TEST(ArchiveReader, FlippedByte) {
  ArchiveBuilder b;
  BuildStandard(&b);
  std::string path = NodeFileName(kNova1);
  std::string bytes = ReadFile(b.path(path));
  std::string damaged = bytes;
  damaged[bytes.size() / 2] ^= 0x20;
  WriteFile(b.path(path), damaged);
  ExpectError(b.dir(), Status::Code::kCorruption,
              {"is damaged", path, "XXH64 is",
               "the manifest records " + b.file_entry(0)["xxh64"].get<std::string>()});
  // A file whose hash differs is not decoded at all, by VerifyArchive either: its frame headers
  // are not to be trusted (one could announce a huge content).
  VerifyReport report;
  EXPECT_FALSE(VerifyArchive(b.dir(), &report).ok());
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_NE(report.problems[0].find("XXH64 is"), std::string::npos) << report.problems[0];
  // Even when the manifest's hash agrees, zstd's checksum of each frame catches it.
  b.Rehash(0);
  ExpectError(b.dir(), Status::Code::kCorruption, {path, "zstd frame"});
}

TEST(ArchiveReader, DamagedManifest) {
  ArchiveBuilder b;
  BuildStandard(&b);
  std::string text = ReadFile(b.path("manifest.json"));
  WriteFile(b.path("manifest.json"), text.substr(0, text.size() / 2));
  std::string manifest = (b.path("manifest.json")).string();
  ExpectError(b.dir(), Status::Code::kCorruption,
              {manifest, "is not valid JSON", "line", "restore the archive from a copy"});
  WriteFile(b.path("manifest.json"), "");
  ExpectError(b.dir(), Status::Code::kCorruption, {manifest, "not valid JSON"});
  // Valid JSON, wrong content.
  b.manifest()["files"][0]["rows"] = "many";
  b.WriteManifest();
  ExpectError(b.dir(), Status::Code::kCorruption,
              {manifest, "files[0].rows should be a non-negative integer"});
  b.manifest()["files"][0]["rows"] = 303;
  b.manifest()["files"][0]["path"] = "../../etc/passwd";
  b.WriteManifest();
  ExpectError(b.dir(), Status::Code::kCorruption, {"files[0].path", "is not a data file name"});
  b.manifest()["files"][0]["path"] = NodeFileName(kNova1);
  b.manifest()["state"] = "done";
  b.WriteManifest();
  ExpectError(b.dir(), Status::Code::kCorruption, {"\"state\" should be"});
}

TEST(ArchiveReader, MissingFile) {
  ArchiveBuilder b;
  BuildStandard(&b);
  fs::remove(b.path(NodeFileName(kNova2)));
  ExpectError(b.dir(), Status::Code::kCorruption,
              {"is damaged", NodeFileName(kNova2), "missing", "100 rows"});
  // Only nova-1 asked for: nova-2's file is not needed.
  LoadOptions o;
  o.nodes = {kNova1};
  EXPECT_TRUE(Load(b.dir(), o)->status.ok());
}

TEST(ArchiveReader, ForeignDirectories) {
  ArchiveBuilder b;
  ExpectError(b.dir(), Status::Code::kNotFound,
              {"manifest.json not found", "is not a kwatt archive"}, {}, true);
  ExpectError(b.dir() + "/nothing", Status::Code::kNotFound, {"no such directory"}, {}, true);
  WriteFile(b.path("manifest.json"), R"({"name": "my experiment", "format_version": 1})");
  ExpectError(b.dir(), Status::Code::kCorruption,
              {"is not the manifest of a kwatt archive", "holds something else"});
  WriteFile(b.path("manifest.json"), R"({"format": "parquet"})");
  ExpectError(b.dir(), Status::Code::kCorruption, {"its \"format\" is \"parquet\""});
}

TEST(ArchiveReader, UnknownFormatVersion) {
  ArchiveBuilder b;
  BuildStandard(&b);
  b.manifest()["format_version"] = 2;
  b.WriteManifest();
  ExpectError(b.dir(), Status::Code::kCorruption,
              {"manifest.json", "format_version 2", "this kwatt reads version 1 only"});
}

TEST(ArchiveReader, RowsDifferingFromTheManifest) {
  ArchiveBuilder b;
  BuildStandard(&b);
  // The manifest agrees with itself (its metrics add up to its rows), not with the data.
  b.file_entry(1)["rows"] = 99;
  b.file_entry(1)["metrics"][kWatt] = 99;
  b.WriteManifest();
  ExpectError(b.dir(), Status::Code::kCorruption,
              {NodeFileName(kNova2), "holds 100 rows, the manifest records 99"});
  b.file_entry(1)["rows"] = 100;
  b.file_entry(1)["metrics"][kWatt] = 99;
  b.file_entry(1)["metrics"]["bmc_node_power_watt"] = 1;
  b.WriteManifest();
  ExpectError(b.dir(), Status::Code::kCorruption,
              {NodeFileName(kNova2),
               "holds 0 rows of bmc_node_power_watt, the manifest "
               "records 1"});
  // A manifest that disagrees with itself is refused before any row is read.
  b.file_entry(1)["metrics"].erase("bmc_node_power_watt");
  b.WriteManifest();
  ExpectError(b.dir(), Status::Code::kCorruption,
              {NodeFileName(kNova2), "counts 99 rows in its metrics but 100 in \"rows\""});
}

TEST(ArchiveReader, ExtraRowInAFile) {
  ArchiveBuilder b;
  BuildStandard(&b);
  // One more frame with one more row, the hash and size updated: only the counts tell.
  std::string path = NodeFileName(kNova2);
  WriteFile(b.path(path),
            ReadFile(b.path(path)) +
                Compress(MakeRow("nova-2", kWatt, kT0 + 100 * kNanosPerSecond, 1) + "\n"));
  b.file_entry(1)["frames"] = 3;
  b.Rehash(1);
  ExpectError(b.dir(), Status::Code::kCorruption,
              {path, "holds 101 rows, the manifest records 100"});
}

TEST(ArchiveReader, FramesAgainstTheFormat) {
  const std::string row0 = MakeRow("nova-1", kWatt, kT0, 1);
  const std::string row1 = MakeRow("nova-1", kWatt, kT0 + 1, 2);
  struct Case {
    std::string bytes;
    std::string expected;
  };
  std::vector<Case> cases = {
      {Compress(row0 + "\n" + row1 + "\n", /*checksum=*/false), "has no checksum"},
      {Compress(row0 + "\n" + row1 + "\n", true, /*content_size=*/false),
       "does not record its content size"},
      // A row cut across two frames.
      {Compress(row0 + "\n" + row1.substr(0, 20)) + Compress(row1.substr(20) + "\n"),
       "a frame must hold whole rows"},
      {Compress(row0 + "\n" + row1), "not followed by a newline"},
      {Compress(row0 + "\n\n" + row1 + "\n"), "blank line"},
      {Compress(row0 + "\n" + R"({"timestamp":"2025-04-18T14:00:00+02:00","device_id":"x"})" +
                "\n"),
       "line 2"},
      {std::string("\x50\x2a\x4d\x18\x00\x00\x00\x00", 8) + Compress(row0 + "\n"), "skippable"},
      {"garbage!", "not a zstd frame"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    ArchiveBuilder b;
    b.Add(NodeData{kNova1, "lyon", {row0, row1}, 0});
    b.Write();
    WriteFile(b.path(NodeFileName(kNova1)), c.bytes);
    size_t frames = 0;
    for (size_t pos = 0; pos < c.bytes.size();) {
      size_t n = ZSTD_findFrameCompressedSize(c.bytes.data() + pos, c.bytes.size() - pos);
      if (ZSTD_isError(n)) break;
      pos += n;
      ++frames;
    }
    b.file_entry(0)["frames"] = std::max<size_t>(frames, 1);
    b.Rehash(0);
    ExpectError(b.dir(), Status::Code::kCorruption, {NodeFileName(kNova1), c.expected});
  }
}

TEST(ArchiveReader, VerifyNamesEveryDamage) {
  ArchiveBuilder b;
  BuildStandard(&b);
  WriteFile(b.path("data/stray.jsonl.zst"), "x");
  std::string bytes = ReadFile(b.path(NodeFileName(kNova2)));
  WriteFile(b.path(NodeFileName(kNova2)), bytes + "more");
  b.file_entry(2)["first"] = FormatParisTimestamp(kT0 + kNanosPerSecond);
  b.WriteManifest();
  VerifyReport report;
  Status status = VerifyArchive(b.dir(), &report);
  ASSERT_EQ(status.code(), Status::Code::kCorruption) << status.ToString();
  EXPECT_NE(status.message().find("and 2 more problem(s)"), std::string::npos) << status.message();
  ASSERT_EQ(report.problems.size(), 3u);
  EXPECT_NE(report.problems[0].find(NodeFileName(kNova2) + ": " + std::to_string(bytes.size() + 4) +
                                    " bytes, the manifest records " + std::to_string(bytes.size())),
            std::string::npos)
      << report.problems[0];
  EXPECT_NE(report.problems[1].find(OtherFileName("lyon") + ": its first row is at"),
            std::string::npos)
      << report.problems[1];
  EXPECT_NE(report.problems[2].find("data/stray.jsonl.zst: not listed in the manifest"),
            std::string::npos)
      << report.problems[2];
}

TEST(ArchiveReader, LargeArchiveWithEveryThreadCount) {
  // Frames of about 1 MiB as the format writes them, three nodes: the parallel paths at scale.
  ArchiveBuilder b;
  for (int n = 1; n <= 3; ++n) {
    NodeData node{"nova-" + std::to_string(n) + ".lyon.grid5000.fr", "lyon", {}, 7000};
    for (int i = 0; i < 20000; ++i) {
      node.rows.push_back(
          MakeRow("nova-" + std::to_string(n), kWatt, kT0 + int64_t(i) * 20 * kNanosPerMilli,
                  100 + (i * n) % 53 * 0.5,
                  R"({"_device_orig":["wattmetre1-port)" + std::to_string(n) + R"("]})"));
    }
    b.Add(node);
  }
  b.Write();
  std::vector<std::string> expected = ExpectedRows(b, b.manifest());
  ASSERT_EQ(expected.size(), 60000u);
  std::vector<uint32_t> devices;
  for (int threads : {1, 2, 5}) {
    LoadOptions options;
    options.threads = threads;
    auto loaded = Load(b.dir(), options);
    ASSERT_TRUE(loaded->status.ok()) << loaded->status.ToString();
    ASSERT_EQ(RawRows(loaded->batch), expected);
    if (devices.empty()) devices = loaded->batch.device;
    EXPECT_EQ(loaded->batch.device, devices);
  }
  Streamed streamed = Stream(b.dir(), {});
  ASSERT_TRUE(streamed.status.ok());
  EXPECT_EQ(streamed.rows, expected);
}

}  // namespace
}  // namespace kwatt::archive::reader_test

// An archive's data file (zstd frames of JSON Lines rows): the input is the file, and the
// manifest is written to match its size and XXH64, so that the frame and row checks are reached.
// VerifyArchive, LoadArchive and ArchiveReader must never crash, never allocate what a frame
// header claims without bound, and agree: the loaders succeed only if verification does.
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/archive/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  namespace ar = kwatt::archive;
  std::string_view file(reinterpret_cast<const char*>(data), size);
  const fs::path& dir = kwatt::fuzz::ScratchDir();
  std::error_code error;
  fs::create_directories(dir / "data", error);
  kwatt::fuzz::WriteFile(dir / "data" / "nova-1.lyon.grid5000.fr.jsonl.zst", file);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(XXH64(data, size, 0)));
  std::string manifest = R"({"format":"kwatt-archive","format_version":1,"state":"complete",
    "query":{"api":"http://127.0.0.1/stable","nodes":["nova-1.lyon.grid5000.fr"],"job":null,
             "start":"1744977600.000000","end":"1744977660.000000","metrics":[],"summary":false},
    "window":{"start":"2025-04-18T12:00:00Z","end":"2025-04-18T12:01:00Z",
              "start_ns":1744977600000000000,"end_ns":1744977660000000000},
    "sites":["lyon"],"job_types":[],
    "nodes":[{"node":"nova-1.lyon.grid5000.fr","uid":"nova-1","site":"lyon","cluster":"nova",
              "file":"data/nova-1.lyon.grid5000.fr.jsonl.zst"}],
    "catalogue":{},
    "files":[{"path":"data/nova-1.lyon.grid5000.fr.jsonl.zst","node":"nova-1.lyon.grid5000.fr",
              "rows":2,"bytes":)" +
                         std::to_string(size) + R"(,"frames":1,"xxh64":")" + hash +
                         R"(","first":null,"last":null,"metrics":{}}]})";
  kwatt::fuzz::WriteFile(dir / "manifest.json", manifest);
  ar::VerifyReport report;
  kwatt::Status verified = ar::VerifyArchive(dir.string(), &report);
  kwatt::StringInterner interner;
  kwatt::RowBatch batch;
  ar::LoadOptions options;
  options.threads = 1;
  kwatt::Status loaded = ar::LoadArchive(dir.string(), options, &interner, &batch);
  KWATT_FUZZ_CHECK(!loaded.ok() || verified.ok());
  kwatt::Result<std::unique_ptr<ar::ArchiveReader>> reader =
      ar::ArchiveReader::Open(dir.string(), options);
  if (reader.ok()) {
    kwatt::RowBatch rows;
    while ((*reader)->Next(&rows)) {
    }
    KWATT_FUZZ_CHECK(!(*reader)->status().ok() || verified.ok());
  }
  return 0;
}

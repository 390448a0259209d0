// Times kwatt::archive::LoadArchive on an archive: the whole archive into one RowBatch.
//
// Usage: kwatt_load_bench DIR [--runs N] [--no-raw] [--reuse] [--threads N]
//
// Each run loads every row of DIR (default LoadOptions: every node, metric and instant) and
// prints one line of JSON: {"run": i, "rows": ..., "seconds": ..., "rows_per_s": ...}, where
// seconds is steady_clock around the LoadArchive call only. By default each run loads into a
// fresh StringInterner and RowBatch (its memory touched for the first time); with --reuse, one
// untimed load first, then each run calls Clear() on the same batch and loads again into the
// capacity it already has. --no-raw: keep_raw = false (no row text). Exit status 1 on a load
// error (printed), 2 on bad arguments.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "kwatt/archive/reader.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: kwatt_load_bench DIR [--runs N] [--no-raw] [--reuse] [--threads N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int runs = 3;
  bool reuse = false;
  kwatt::archive::LoadOptions options;  // every row, keep_raw
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      options.threads = std::atoi(argv[++i]);
    } else if (arg == "--no-raw") {
      options.keep_raw = false;
    } else if (arg == "--reuse") {
      reuse = true;
    } else if (!arg.empty() && arg[0] != '-' && dir.empty()) {
      dir = arg;
    } else {
      return Usage();
    }
  }
  if (dir.empty() || runs < 1) return Usage();

  auto interner = std::make_unique<kwatt::StringInterner>();
  auto batch = std::make_unique<kwatt::RowBatch>();
  if (reuse) {  // the untimed first load, whose capacity the timed runs reuse
    kwatt::Status st = kwatt::archive::LoadArchive(dir, options, interner.get(), batch.get());
    if (!st.ok()) {
      std::fprintf(stderr, "kwatt_load_bench: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  for (int run = 1; run <= runs; ++run) {
    if (reuse) {
      batch->Clear();
    } else {
      batch.reset();  // the previous run's memory is freed before the timed load
      interner.reset();
      interner = std::make_unique<kwatt::StringInterner>();
      batch = std::make_unique<kwatt::RowBatch>();
    }
    kwatt::archive::LoadReport report;
    auto t0 = std::chrono::steady_clock::now();
    kwatt::Status st =
        kwatt::archive::LoadArchive(dir, options, interner.get(), batch.get(), &report);
    auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) {
      std::fprintf(stderr, "kwatt_load_bench: %s\n", st.ToString().c_str());
      return 1;
    }
    double seconds = std::chrono::duration<double>(t1 - t0).count();
    std::printf(
        "{\"run\": %d, \"rows\": %zu, \"report_rows\": %lld, \"files\": %zu, "
        "\"compressed_bytes\": %lld, \"text_bytes\": %lld, \"raw_bytes\": %zu, "
        "\"seconds\": %.6f, \"rows_per_s\": %.0f, \"keep_raw\": %s, \"reuse\": %s}\n",
        run, batch->size(), static_cast<long long>(report.rows), report.files.size(),
        static_cast<long long>(report.compressed_bytes), static_cast<long long>(report.text_bytes),
        batch->raw.size(), seconds, seconds > 0 ? batch->size() / seconds : 0.0,
        options.keep_raw ? "true" : "false", reuse ? "true" : "false");
    std::fflush(stdout);
  }
  return 0;
}

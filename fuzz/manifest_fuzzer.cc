// An archive's manifest.json and journal.jsonl (doc/archive_format.md), as ReadManifest, the
// readers and `kwatt inspect --verify` take them: no crash, whatever the JSON. The input is the
// manifest, then optionally "\n@@journal@@\n" and the journal.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/archive/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto [manifest, journal] = kwatt::fuzz::SplitInput(input, "\n@@journal@@\n");
  const fs::path& dir = kwatt::fuzz::ScratchDir();
  std::error_code error;
  fs::remove(dir / "journal.jsonl", error);
  fs::create_directories(dir / "data", error);
  kwatt::fuzz::WriteFile(dir / "manifest.json", manifest);
  if (!journal.empty()) kwatt::fuzz::WriteFile(dir / "journal.jsonl", journal);
  kwatt::Result<kwatt::archive::Manifest> m = kwatt::archive::ReadManifest(dir.string());
  if (m.ok()) {
    (void)m->rows();
    (void)m->MetricRows();
    kwatt::archive::VerifyReport report;
    (void)kwatt::archive::VerifyArchive(dir.string(), &report);
  }
  return 0;
}

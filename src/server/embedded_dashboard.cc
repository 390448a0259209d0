#include "src/server/embedded_dashboard.h"

#include <vector>

// Each file is pulled in by the assembler (.incbin), as the reference data is
// (src/simulate/embedded_reference.cc). The directories come from CMake: KWATT_DASHBOARD_DIR (the
// pages, src/server/dashboard/) and KWATT_UPLOT_DIR (uPlot's dist/, unpacked by `make deps`).
#define KWATT_STRINGIFY2(x) #x
#define KWATT_STRINGIFY(x) KWATT_STRINGIFY2(x)
#define KWATT_EMBED(symbol, dir, file)                                                            \
  extern "C" const char symbol##_begin[];                                                         \
  extern "C" const char symbol##_end[];                                                           \
  asm(".section .rodata\n.global " #symbol "_begin\n" #symbol                                     \
      "_begin:\n.incbin \"" KWATT_STRINGIFY(dir) "/" file "\"\n.global " #symbol "_end\n" #symbol \
                                                 "_end:\n.byte 0\n.previous\n");

KWATT_EMBED(kwatt_dash_index, KWATT_DASHBOARD_DIR, "index.html")
KWATT_EMBED(kwatt_dash_app_js, KWATT_DASHBOARD_DIR, "app.js")
KWATT_EMBED(kwatt_dash_app_css, KWATT_DASHBOARD_DIR, "app.css")
KWATT_EMBED(kwatt_dash_uplot_js, KWATT_UPLOT_DIR, "uPlot.iife.min.js")
KWATT_EMBED(kwatt_dash_uplot_css, KWATT_UPLOT_DIR, "uPlot.min.css")

namespace kwatt::server::internal {

const DashboardFile* FindDashboardFile(std::string_view name) {
#define KWATT_FILE(symbol, file, type) \
  { file, type, std::string_view(symbol##_begin, size_t(symbol##_end - symbol##_begin)) }
  static const std::vector<DashboardFile> files = {
      KWATT_FILE(kwatt_dash_index, "index.html", "text/html; charset=utf-8"),
      KWATT_FILE(kwatt_dash_app_js, "app.js", "text/javascript; charset=utf-8"),
      KWATT_FILE(kwatt_dash_app_css, "app.css", "text/css; charset=utf-8"),
      KWATT_FILE(kwatt_dash_uplot_js, "uPlot.iife.min.js", "text/javascript; charset=utf-8"),
      KWATT_FILE(kwatt_dash_uplot_css, "uPlot.min.css", "text/css; charset=utf-8"),
  };
#undef KWATT_FILE
  for (const DashboardFile& file : files) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

}  // namespace kwatt::server::internal

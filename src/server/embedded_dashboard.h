// The dashboard's static files (its pages and uPlot), embedded in the binary at build time
// (CMakeLists.txt, .incbin as the reference data). Internal to the server.
#ifndef KWATT_SRC_SERVER_EMBEDDED_DASHBOARD_H_
#define KWATT_SRC_SERVER_EMBEDDED_DASHBOARD_H_

#include <string_view>

namespace kwatt::server::internal {

struct DashboardFile {
  std::string_view name;          // "index.html", "app.js", "uPlot.iife.min.js"...
  std::string_view content_type;  // "text/html; charset=utf-8"...
  std::string_view content;
};

// The file called `name` under /dashboard/, or null.
const DashboardFile* FindDashboardFile(std::string_view name);

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_EMBEDDED_DASHBOARD_H_

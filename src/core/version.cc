// kwatt's version (include/kwatt/core/version.h): compiled with KWATT_VERSION from CMake.
#include "kwatt/core/version.h"

namespace kwatt {

const char* KwattVersion() { return KWATT_VERSION; }

}  // namespace kwatt

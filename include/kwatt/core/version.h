// kwatt's version, the one place it is kept: CMake's PROJECT_VERSION (the top CMakeLists.txt),
// which `kwatt --version`, `kwatt._core.__version__`, archives' manifests, reports and the meter's
// outputs all say.
#ifndef KWATT_CORE_VERSION_H_
#define KWATT_CORE_VERSION_H_

namespace kwatt {

// "0.1.0".
const char* KwattVersion();

}  // namespace kwatt

#endif  // KWATT_CORE_VERSION_H_

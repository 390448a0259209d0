# kwatt's build dependencies. Each is looked for quietly; what is missing is named at the end, all
# of it at once, with the Debian package that provides it (doc/install.md), rather than CMake's
# own message about a config file.

set(_kwatt_missing "")
macro(_kwatt_need found debian_package)
  if(NOT ${found})
    list(APPEND _kwatt_missing ${debian_package})
  endif()
endmacro()

find_package(PkgConfig QUIET)
_kwatt_need(PKG_CONFIG_FOUND pkg-config)
find_package(Threads REQUIRED)
# The header-only libraries: their CMake package, or, where a tree has the headers alone (the
# wheels' cross-build, doc/install.md), the header.
macro(_kwatt_header_only found target header)
  if(NOT ${found})
    find_path(_kwatt_${found}_dir ${header})
    if(_kwatt_${found}_dir)
      add_library(${target} INTERFACE IMPORTED)
      target_include_directories(${target} SYSTEM INTERFACE ${_kwatt_${found}_dir})
      set(${found} TRUE)
    endif()
  endif()
endmacro()
find_package(nlohmann_json 3.10 QUIET)
_kwatt_header_only(nlohmann_json_FOUND nlohmann_json::nlohmann_json nlohmann/json.hpp)
_kwatt_need(nlohmann_json_FOUND nlohmann-json3-dev)
find_package(CLI11 QUIET)
_kwatt_header_only(CLI11_FOUND CLI11::CLI11 CLI/CLI.hpp)
_kwatt_need(CLI11_FOUND libcli11-dev)
find_package(CURL QUIET)
_kwatt_need(CURL_FOUND libcurl4-openssl-dev)
find_package(zstd QUIET)
if(NOT zstd_FOUND AND PKG_CONFIG_FOUND)
  # libzstd without its CMake files (Debian 11's, which the wheels are built against).
  pkg_check_modules(ZSTD QUIET IMPORTED_TARGET libzstd)
  if(ZSTD_FOUND)
    add_library(zstd::libzstd_shared INTERFACE IMPORTED)
    target_link_libraries(zstd::libzstd_shared INTERFACE PkgConfig::ZSTD)
    set(zstd_FOUND TRUE)
  endif()
endif()
_kwatt_need(zstd_FOUND libzstd-dev)
find_package(ZLIB QUIET)
_kwatt_need(ZLIB_FOUND zlib1g-dev)
# Boost, header-only: Math's distributions (Student's t for runs compared), Beast and Asio (the
# HTTP server, src/http/hardened_server.cc).
find_package(Boost 1.74 QUIET)
_kwatt_need(Boost_FOUND libboost-dev)
find_path(KWATT_XXHASH_INCLUDE xxhash.h)
find_library(KWATT_XXHASH_LIBRARY xxhash)
_kwatt_need(KWATT_XXHASH_LIBRARY libxxhash-dev)
if(NOT PKG_CONFIG_FOUND)
  # Without pkg-config none of these could be looked for: name them now rather than in a second
  # round, once pkg-config is installed.
  list(APPEND _kwatt_missing libsqlite3-dev libpq-dev libyaml-dev libsnmp-dev)
else()
  pkg_check_modules(SQLITE3 QUIET IMPORTED_TARGET sqlite3)
  _kwatt_need(SQLITE3_FOUND libsqlite3-dev)
  pkg_check_modules(LIBPQ QUIET IMPORTED_TARGET libpq)
  _kwatt_need(LIBPQ_FOUND libpq-dev)
  pkg_check_modules(LIBYAML QUIET IMPORTED_TARGET yaml-0.1)
  _kwatt_need(LIBYAML_FOUND libyaml-dev)
  pkg_check_modules(NETSNMP QUIET IMPORTED_TARGET netsnmp)
  _kwatt_need(NETSNMP_FOUND libsnmp-dev)
endif()
if(KWATT_BUILD_PYTHON)
  find_package(Python 3.9 QUIET COMPONENTS Interpreter Development.Module)
  _kwatt_need(Python_FOUND python3-dev)
  if(NOT pybind11_DIR AND Python_FOUND)
    # pybind11 from the interpreter's own packages (pip's build environment), also where a
    # cross-build looks for packages in its Debian root alone.
    execute_process(COMMAND ${Python_EXECUTABLE} -m pybind11 --cmakedir
                    OUTPUT_VARIABLE _kwatt_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET)
    if(_kwatt_pybind11_dir)
      set(pybind11_DIR ${_kwatt_pybind11_dir} CACHE PATH "pybind11's CMake files")
    endif()
  endif()
  find_package(pybind11 2.10 CONFIG QUIET)
  _kwatt_need(pybind11_FOUND pybind11-dev)
endif()
if(KWATT_TESTS)
  find_package(GTest QUIET)
  _kwatt_need(GTest_FOUND "libgtest-dev libgmock-dev")
endif()

# uPlot (the dashboard's plots), from npm's registry: a clone does not carry it, the sdist does.
set(KWATT_UPLOT_DIR ${PROJECT_SOURCE_DIR}/third_party/uplot/dist)
set(_kwatt_uplot "")
foreach(file uPlot.iife.min.js uPlot.min.css)
  if(NOT EXISTS ${KWATT_UPLOT_DIR}/${file})
    string(CONCAT _kwatt_uplot
      "uPlot, the dashboard's plots, is missing (${KWATT_UPLOT_DIR}/${file}): a clone does not "
      "carry it. `make uplot` fetches it from npm's registry (npm only, no root); kwatt's source "
      "archive (make sdist) carries it.\n")
  endif()
endforeach()

if(_kwatt_missing)
  list(REMOVE_DUPLICATES _kwatt_missing)
  list(JOIN _kwatt_missing " " _kwatt_packages)
  message(FATAL_ERROR
    "kwatt: missing build dependencies. On Debian or Ubuntu, as root:\n"
    "  apt-get install ${_kwatt_packages}\n"
    "(make deps installs every one of them; doc/install.md lists them). Without root, install "
    "the self-contained wheel instead: pip install kwatt-VERSION-cp3XX-cp3XX-manylinux_*.whl\n"
    ${_kwatt_uplot})
elseif(_kwatt_uplot)
  message(FATAL_ERROR "kwatt: ${_kwatt_uplot}")
endif()

add_library(kwatt_xxhash INTERFACE)
target_include_directories(kwatt_xxhash SYSTEM INTERFACE ${KWATT_XXHASH_INCLUDE})
target_link_libraries(kwatt_xxhash INTERFACE ${KWATT_XXHASH_LIBRARY})

// The master's dashboard page, dashboard.html beside this header, compiled into the binary so
// the master serves "/" with no file on disk (air-gapped clusters, installed binaries).
// ferry_embed_text() (cmake/FerryEmbedFile.cmake) turns the page into bytes at build time and
// again whenever it changes; link the ferry_dashboard_page library to get the definition.
#pragma once

#include <string_view>

namespace ferry::master {

// The page (UTF-8 HTML, one self-contained file), valid for the whole run of the program. The
// bytes are NUL-terminated just past the view's end. Thread-safe: constant data.
std::string_view dashboard_html();

}  // namespace ferry::master

#include "tool_cli.h"

#include "ferry/ferry.h"  // the version macros only: nothing here calls libferry

namespace ferry::tooling {

namespace {

#define FERRY_TOOL_STRINGIFY_(x) #x
#define FERRY_TOOL_STRINGIFY(x) FERRY_TOOL_STRINGIFY_(x)
constexpr const char* kBuiltVersion = FERRY_TOOL_STRINGIFY(FERRY_VERSION_MAJOR) "." FERRY_TOOL_STRINGIFY(
    FERRY_VERSION_MINOR) "." FERRY_TOOL_STRINGIFY(FERRY_VERSION_PATCH);

}  // namespace

const char* built_ferry_version() { return kBuiltVersion; }

std::string version_text(std::string_view tool, std::string_view ferry_version, unsigned protocol) {
  std::string text = std::string(tool) + " " + std::string(ferry_version);
  if (protocol != 0) text += " (wire protocol " + std::to_string(protocol) + ")";
  return text;
}

void add_version_flag(CLI::App& app, const std::string& text) {
  app.set_version_flag("--version", text, "Print the version and exit");
}

int exit_status(const CLI::App& app, const CLI::ParseError& error) {
  return app.exit(error) == 0 ? 0 : kExitBadArguments;
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return exit_status(app, error);
  }
  return std::nullopt;
}

}  // namespace ferry::tooling

// What every ferry tool's command line shares, so that a user (or a script)
// meets one contract everywhere:
//   --version  prints "TOOL VERSION" (plus the wire protocol where the tool
//              knows it) on stdout and exits 0;
//   --help     prints the usage on stdout and exits 0;
//   a bad argument prints the reason and CLI11's "Run with --help" hint on
//              stderr and exits 2, whatever CLI11 calls the error (its own
//              exit codes, 105 to 115, are not an interface we promise).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace ferry::tooling {

inline constexpr int kExitBadArguments = 2;

// The ferry version this tree builds (ferry.h's FERRY_VERSION_*, which the
// configure step ties to project(VERSION)): for tools that do not link libferry
// and so cannot ask ferry_version().
const char* built_ferry_version();

// "ferry-master X.Y.Z (wire protocol N)", N the caller's wire::kProtocolVersion;
// protocol 0: the tool does not know it (it links only the C API, which does
// not say), so the line leaves it out.
std::string version_text(std::string_view tool, std::string_view ferry_version, unsigned protocol = 0);

// Adds --version, printing `text`.
void add_version_flag(CLI::App& app, const std::string& text);

// The exit status for what app.parse threw, after printing what CLI11 prints
// for it: 0 for --help and --version, kExitBadArguments for the rest.
int exit_status(const CLI::App& app, const CLI::ParseError& error);

// Parses argv; empty when the tool should go on, else the status to exit with now.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// Parses argv for a tool whose own argument parser reports a bad command line
// by throwing ArgsError(message), so that its tests can see the refusal and
// its main says it in the tool's own words. False after --help or --version
// (printed; the tool exits 0), true when the tool should go on.
template <class ArgsError>
bool parse_or_throw(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& done) {
    exit_status(app, done);
    return false;
  } catch (const CLI::ParseError& error) {
    throw ArgsError(error.what());
  }
  return true;
}

}  // namespace ferry::tooling

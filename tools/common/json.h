// Just enough JSON for the tools: a streaming writer for ferry-bench's and
// ferry-chaos's reports and the peers' lines, and a reader for the lines of
// ferry-bench's children (ferry peers, Gloo ranks). Debian's nlohmann-json is
// not a build dependency of ferry, and these documents are small and flat.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::tooling {

// Appends tokens with the commas in the right places. Misuse (a value where a
// key is due) is a programming error, not checked at run time.
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(bool flag);
  JsonWriter& value(double number);  // NaN and infinities become null
  JsonWriter& value(std::int64_t number);
  JsonWriter& value(std::uint64_t number);
  JsonWriter& value(int number) { return value(static_cast<std::int64_t>(number)); }
  JsonWriter& value(unsigned number) { return value(static_cast<std::uint64_t>(number)); }
  JsonWriter& null();
  // A line break and `indent` spaces before the next element (after its comma)
  // or closing bracket, for a file people read.
  JsonWriter& newline(int indent);

  const std::string& str() const { return out_; }

 private:
  void separate();
  void flush_newline();

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
  int pending_indent_ = -1;  // -1: no line break pending
};

// A parsed JSON value. Objects keep their keys in order (keys[i] names items[i]).
struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> items;
  std::vector<std::string> keys;

  // The member called `name` of an object, or nullptr.
  const JsonValue* find(std::string_view name) const;
};

// Parses one complete JSON text (surrounding whitespace allowed). On failure
// returns std::nullopt and, if given, sets *error to where and why.
std::optional<JsonValue> parse_json(std::string_view text, std::string* error = nullptr);

// --- reading child processes' report lines ---

// A member missing or of the wrong kind; what() names it.
class JsonFieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const JsonValue& json_field(const JsonValue& object, std::string_view name, JsonValue::Kind kind);
double json_number(const JsonValue& object, std::string_view name);
std::vector<double> json_numbers(const JsonValue& object, std::string_view name);
std::vector<std::string> json_strings(const JsonValue& object, std::string_view name);

// Calls `each` with every non-blank line of `out` (a child's stdout), parsed.
// Throws std::runtime_error naming `who` and the line when a line is not JSON
// or `each` throws JsonFieldError.
void for_each_json_line(const std::string& out, const std::string& who,
                        const std::function<void(const JsonValue&)>& each);

// Writes `text` and a newline to `path`; throws std::runtime_error naming `what` on failure.
void write_text_file(const std::string& path, const std::string& text, const std::string& what);

}  // namespace ferry::tooling

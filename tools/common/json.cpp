#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ferry::tooling {

// --- writer ----------------------------------------------------------------------

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  flush_newline();
}

void JsonWriter::flush_newline() {
  if (pending_indent_ < 0) return;
  out_ += '\n';
  out_.append(static_cast<std::size_t>(pending_indent_), ' ');
  pending_indent_ = -1;
}

JsonWriter& JsonWriter::begin_object() {
  separate();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  flush_newline();
  out_ += '}';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  flush_newline();
  out_ += ']';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view name) {
  value(name);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view text) {
  separate();
  out_ += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out_ += escaped;
        } else {
          out_ += c;
        }
    }
  }
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(double number) {
  if (!std::isfinite(number)) return null();
  separate();
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", number);
  out_ += text;
  return *this;
}

JsonWriter& JsonWriter::value(std::int64_t number) {
  separate();
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::value(std::uint64_t number) {
  separate();
  out_ += std::to_string(number);
  return *this;
}

JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::newline(int indent) {
  pending_indent_ = indent;
  return *this;
}

// --- reader ----------------------------------------------------------------------

const JsonValue* JsonValue::find(std::string_view name) const {
  if (kind != Kind::object) return nullptr;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == name) return &items[i];
  }
  return nullptr;
}

namespace {

// Recursive descent over the whole text; the depth bound keeps a hostile line
// from exhausting the stack.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::optional<JsonValue> parse_document(std::string* error) {
    JsonValue root;
    skip_space();
    if (parse_value(root, 0)) {
      skip_space();
      if (pos_ == text_.size()) return root;
      fail("unexpected text after the value");
    }
    if (error) *error = "offset " + std::to_string(pos_) + ": " + error_;
    return std::nullopt;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool fail(const char* why) {
    if (error_.empty()) error_ = why;
    return false;
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return fail("unknown literal");
    pos_ += word.size();
    return true;
  }

  bool parse_value(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    if (pos_ >= text_.size()) return fail("unexpected end");
    switch (text_[pos_]) {
      case '{': return parse_object(out, depth);
      case '[': return parse_array(out, depth);
      case '"': out.kind = JsonValue::Kind::string; return parse_string(out.string);
      case 't': out.kind = JsonValue::Kind::boolean; out.boolean = true; return literal("true");
      case 'f': out.kind = JsonValue::Kind::boolean; out.boolean = false; return literal("false");
      case 'n': out.kind = JsonValue::Kind::null; return literal("null");
      default: return parse_number(out);
    }
  }

  bool parse_number(JsonValue& out) {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::string_view("+-0123456789.eE").find(text_[pos_]) != std::string_view::npos) ++pos_;
    if (pos_ == start) return fail("expected a value");
    const std::string digits(text_.substr(start, pos_ - start));
    char* end = nullptr;
    out.kind = JsonValue::Kind::number;
    out.number = std::strtod(digits.c_str(), &end);
    if (end != digits.c_str() + digits.size()) return fail("malformed number");
    return true;
  }

  bool parse_string(std::string& out) {
    ++pos_;  // the opening quote
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char escape = text_[pos_++];
      switch (escape) {
        case '"': case '\\': case '/': out += escape; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return fail("short \\u escape");
          const unsigned code = static_cast<unsigned>(std::strtoul(std::string(text_.substr(pos_, 4)).c_str(), nullptr, 16));
          pos_ += 4;
          // Only what this program's children emit: ASCII control characters.
          out += code < 0x80 ? static_cast<char>(code) : '?';
          break;
        }
        default: return fail("unknown escape");
      }
    }
    return fail("unterminated string");
  }

  bool parse_array(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::array;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      skip_space();
      out.items.emplace_back();
      if (!parse_value(out.items.back(), depth + 1)) return false;
      skip_space();
      if (pos_ >= text_.size()) return fail("unterminated array");
      const char c = text_[pos_++];
      if (c == ']') return true;
      if (c != ',') return fail("expected ',' or ']'");
    }
  }

  bool parse_object(JsonValue& out, int depth) {
    out.kind = JsonValue::Kind::object;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected a key");
      out.keys.emplace_back();
      if (!parse_string(out.keys.back())) return false;
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      skip_space();
      out.items.emplace_back();
      if (!parse_value(out.items.back(), depth + 1)) return false;
      skip_space();
      if (pos_ >= text_.size()) return fail("unterminated object");
      const char c = text_[pos_++];
      if (c == '}') return true;
      if (c != ',') return fail("expected ',' or '}'");
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::string error_;
};

}  // namespace

std::optional<JsonValue> parse_json(std::string_view text, std::string* error) {
  return Parser(text).parse_document(error);
}

// --- report lines ------------------------------------------------------------------

const JsonValue& json_field(const JsonValue& object, std::string_view name, JsonValue::Kind kind) {
  const JsonValue* found = object.find(name);
  if (found == nullptr || found->kind != kind) throw JsonFieldError("missing or mistyped \"" + std::string(name) + "\"");
  return *found;
}

double json_number(const JsonValue& object, std::string_view name) {
  return json_field(object, name, JsonValue::Kind::number).number;
}

std::vector<double> json_numbers(const JsonValue& object, std::string_view name) {
  std::vector<double> out;
  for (const JsonValue& item : json_field(object, name, JsonValue::Kind::array).items) {
    if (item.kind != JsonValue::Kind::number) throw JsonFieldError("\"" + std::string(name) + "\" holds a non-number");
    out.push_back(item.number);
  }
  return out;
}

std::vector<std::string> json_strings(const JsonValue& object, std::string_view name) {
  std::vector<std::string> out;
  for (const JsonValue& item : json_field(object, name, JsonValue::Kind::array).items) {
    if (item.kind != JsonValue::Kind::string) throw JsonFieldError("\"" + std::string(name) + "\" holds a non-string");
    out.push_back(item.string);
  }
  return out;
}

void for_each_json_line(const std::string& out, const std::string& who,
                        const std::function<void(const JsonValue&)>& each) {
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string_view line(out.data() + start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string error;
    const std::optional<JsonValue> parsed = parse_json(line, &error);
    try {
      if (!parsed) throw JsonFieldError("not JSON (" + error + ")");
      each(*parsed);
    } catch (const JsonFieldError& e) {
      throw std::runtime_error(who + " printed a malformed report: " + e.what() + ": " + std::string(line));
    }
  }
}

void write_text_file(const std::string& path, const std::string& text, const std::string& what) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) throw std::runtime_error("cannot write " + what + " " + path + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size() && std::fputc('\n', file) != EOF;
  if (std::fclose(file) != 0 || !written) throw std::runtime_error("cannot write " + what + " " + path + ": " + std::strerror(errno));
}

}  // namespace ferry::tooling

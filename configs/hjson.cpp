// hjson, the syntax DeepSpeed reads its config in (JSON with comments, optional commas, and
// single-quoted and '''multi-line''' strings), in the terms of the YAML reader that parses
// the DeepSpeed config. What this reading does is checked against hjson 3.1 (Python's, which
// DeepSpeed uses).
#include "configs/hjson.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "configs/yaml_text.h"
#include "core/error.h"

namespace zt::config::detail {

namespace {

// A change to the text: `length` characters at `at` replaced by `with` (an insertion when 0).
struct Edit {
  size_t at = 0, length = 0;
  std::string with;
};

// The single-quoted hjson string at `at` (not a ''' one) as a YAML double-quoted string: hjson
// takes JSON's escapes there, and \' for the quote. Sets `end` to its closing quote.
std::string single_quoted(const std::string& text, size_t at, const std::string& path,
                          size_t& end) {
  std::string out = "\"";
  for (size_t j = at + 1; j < text.size() && text[j] != '\n' && text[j] != '\r'; ++j) {
    const char c = text[j];
    if (c == '\'') {
      end = j;
      return out + "\"";
    }
    if (c == '\\' && j + 1 < text.size() && text[j + 1] == '\'') {
      out += '\'';
      ++j;
    } else if (c == '\\' && j + 1 < text.size() && text[j + 1] != '\n' && text[j + 1] != '\r') {
      out += text.substr(j++, 2);  // JSON's escapes are YAML's too
    } else {
      out += c == '"' ? "\\\"" : std::string(1, c);
    }
  }
  throw Error(place(text, at, path) +
              ": the string opened here with ' is not closed on its line (hjson, DeepSpeed's "
              "reader, needs the closing ' on the same line; for text over several lines use "
              "''' ... ''')");
}

// The '''multi-line''' hjson string at `at` as a YAML double-quoted string over as many lines,
// so that what follows keeps its line. As hjson reads it: the rest of the opening line is
// dropped when blank; each following line drops its blanks up to the column of the opening
// quotes; carriage returns and the last line break are dropped; there are no escapes. Sets
// `end` to the last of its closing quotes.
std::string multi_line(const std::string& text, size_t at, const std::string& path, size_t& end) {
  const size_t indent = at - (at == 0 ? 0 : text.rfind('\n', at - 1) + 1);
  auto skip_blanks = [&](size_t j, size_t most) {
    for (; j < text.size() && most > 0 && std::strchr(" \t\r", text[j]) != nullptr; --most) ++j;
    return j;
  };
  size_t j = skip_blanks(at + 3, std::string::npos);
  if (j < text.size() && text[j] == '\n') j = skip_blanks(j + 1, indent);
  std::string value;
  for (;;) {
    if (j >= text.size())
      throw Error(place(text, at, path) +
                  ": the multi-line string opened here with ''' is not closed (hjson, "
                  "DeepSpeed's reader, reads it to the next ''')");
    if (text.compare(j, 3, "'''") == 0) break;
    if (text[j] == '\n') {
      value += '\n';
      j = skip_blanks(j + 1, indent);
    } else {
      if (text[j] != '\r') value += text[j];
      ++j;
    }
  }
  end = j + 2;
  if (!value.empty() && value.back() == '\n') value.pop_back();
  // YAML folds a line break in a double-quoted string and drops the next line's leading
  // blanks: each break is written as \n and an escaped line break ("\" at the end of the
  // line, which adds nothing), and a blank that starts a line is escaped.
  const auto lines = std::count(text.begin() + at, text.begin() + end, '\n');
  const auto extra = lines - std::count(value.begin(), value.end(), '\n');
  std::string out = "\"";
  for (auto k = extra; k > 0; --k) out += "\\\n";
  bool line_start = extra > 0;
  for (const char c : value) {
    if (c == '\n') {
      out += "\\n\\\n";
      line_start = true;
      continue;
    }
    out += c == '"' || c == '\\'     ? std::string("\\") + c
           : line_start && c == ' '  ? std::string("\\ ")
           : line_start && c == '\t' ? std::string("\\t")
                                     : std::string(1, c);
    line_start = false;
  }
  return out + "\"";
}

// Whether hjson reads `s` (blanks trimmed) as a number: JSON's numbers.
bool hjson_number(const std::string& s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i > from;
  };
  if (i < s.size() && s[i] == '0')
    ++i;
  else if (!digits())
    return false;
  if (i < s.size() && s[i] == '.' && (++i, !digits())) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    if (++i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// hjson reads a value without quotes at `at` to the end of its line, unless what stands before
// a ',', '}', ']' or comment there is a number, true, false or null; zt's reader stops at the
// first of those. Where the two would read different values, an error saying to quote it.
void check_unquoted(const std::string& text, size_t at, const std::string& path) {
  const size_t eol = std::min(text.find_first_of("\r\n", at), text.size());
  size_t p = at;
  while (p < eol && std::strchr(",}]#", text[p]) == nullptr &&
         !(text[p] == '/' && p + 1 < eol && (text[p + 1] == '/' || text[p + 1] == '*')))
    ++p;
  if (p == eol) return;
  auto trimmed = [&](size_t end) {
    const size_t b = text.find_first_not_of(" \t", at), e = text.find_last_not_of(" \t", end - 1);
    return b < end && e != std::string::npos && e >= b ? text.substr(b, e - b + 1) : "";
  };
  const std::string value = trimmed(p);
  if (value == "true" || value == "false" || value == "null" || hjson_number(value)) return;
  throw Error(place(text, at, path) + ": the value '" + value +
              "' has no quotes and its line goes on: hjson (DeepSpeed's reader) reads such a "
              "value to the end of its line, comments and commas included ('" +
              trimmed(eol) + "'), zt's reader up to the first; quote it (\"" + value + "\")");
}

}  // namespace

// Comments are blanked out (newlines kept, so errors keep their lines and columns) where they
// are not inside a string, and a comma is put after a member or element that a line break alone
// separates from the next (hjson reads the break as one; YAML's flow syntax needs the comma).
// YAML takes trailing commas as they are and refuses a key given twice. A key without quotes or
// a blank after its ':' ({lr:0.1}), which hjson reads as a key and its value and YAML as one
// key, is an error at its line and column.
std::string hjson_as_yaml(const std::string& text, const std::string& path) {
  std::string out = text;
  std::vector<char> open;   // the enclosing '{' and '['
  char last = 0;            // the last character outside comments and blanks
  size_t last_at = 0;       // and where it is
  bool line_break = false;  // since `last`
  bool at_key = false;      // the next character starts an object's key
  std::vector<Edit> edits;  // in the order of their places
  auto blank = [&](size_t at) {
    return at >= out.size() || std::isspace(static_cast<unsigned char>(out[at]));
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (c == '\n') line_break = true;
    if (blank(i)) continue;
    const char next = i + 1 < out.size() ? out[i + 1] : '\0';
    if (c == '#' || (c == '/' && next == '/')) {
      for (; i + 1 < out.size() && out[i + 1] != '\n'; ++i) out[i] = ' ';
      out[i] = ' ';
      continue;
    }
    if (c == '/' && next == '*') {
      const size_t end = out.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? out.size() : end + 2;
      for (; i < stop; ++i)
        if (out[i] == '\n')
          line_break = true;
        else
          out[i] = ' ';
      --i;
      continue;
    }
    if (line_break && !open.empty() && last != 0 && std::strchr("{[,:", last) == nullptr &&
        std::strchr(",}]:", c) == nullptr) {
      edits.push_back({last_at + 1, 0, ","});
      at_key = open.back() == '{';
    }
    // A quote starts a string where a key or value starts (in "it's" it is text).
    const bool starts = last == 0 || line_break || std::strchr("{[,:", last) != nullptr;
    line_break = false;
    if ((c == '"' || c == '\'') && starts) {
      size_t j = i + 1;
      if (c == '\'') {
        const std::string yaml = out.compare(i, 3, "'''") == 0 ? multi_line(out, i, path, j)
                                                               : single_quoted(out, i, path, j);
        edits.push_back({i, j + 1 - i, yaml});
      } else {
        for (; j < out.size() && out[j] != '"'; ++j)
          if (out[j] == '\\') ++j;
      }
      at_key = false;
      last = '"';
      i = last_at = std::min(j, out.size() - 1);
      continue;
    }
    const bool value = last == ':' || (!at_key && !open.empty() && open.back() == '[');
    if (starts && value && std::strchr("{[]},:", c) == nullptr) check_unquoted(text, i, path);
    if (at_key && c != '}') {
      size_t colon = i;
      while (!blank(colon) && std::strchr(":,{}[]", out[colon]) == nullptr) ++colon;
      if (colon < out.size() && out[colon] == ':' && !blank(colon + 1)) {
        size_t end = colon;
        while (!blank(end) && std::strchr(",{}[]", out[end]) == nullptr) ++end;
        const std::string key = text.substr(i, colon - i);
        throw Error(place(text, i, path) + ": the key '" + key +
                    "' is followed by ':' without a blank: hjson (DeepSpeed's reader) reads a key "
                    "and its value there, zt's reader one key '" +
                    text.substr(i, end - i) + "'; write \"" + key + "\": or " + key +
                    ": (a blank after the ':')");
      }
    }
    at_key = c == '{' || (c == ',' && !open.empty() && open.back() == '{');
    if (c == '{' || c == '[') open.push_back(c);
    if ((c == '}' || c == ']') && !open.empty()) open.pop_back();
    last = c;
    last_at = i;
  }
  for (auto it = edits.rbegin(); it != edits.rend(); ++it)
    out.replace(it->at, it->length, it->with);
  return out;
}

}  // namespace zt::config::detail

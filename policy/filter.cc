#include "policy/filter.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>
#include <utility>

namespace tidepool::policy {
namespace {

constexpr std::size_t kMaxText = 4096;       // the longest expression, pattern or path looked at
constexpr std::size_t kMaxConditions = 256;  // in one filter

struct FieldName {
  Field field;
  const char* name;
};
constexpr FieldName kFields[] = {
    {Field::path, "path"},       {Field::name, "name"},         {Field::iname, "iname"},
    {Field::size, "size"},       {Field::accessed, "accessed"}, {Field::modified, "modified"},
    {Field::changed, "changed"}, {Field::birth, "birth"},       {Field::type, "type"},
    {Field::owner, "owner"},
};

struct ComparisonName {
  Comparison comparison;
  const char* symbol;
  const char* onefs;  // --operator=
};
constexpr ComparisonName kComparisons[] = {
    {Comparison::le, "<=", "le"},    {Comparison::ge, ">=", "ge"},
    {Comparison::eq, "==", "eq"},    {Comparison::ne, "!=", "ne"},
    {Comparison::matches, "=~", ""}, {Comparison::not_matches, "!~", ""},
    {Comparison::lt, "<", "lt"},     {Comparison::gt, ">", "gt"},
};

// The types a filter names, numbered as the store's FileType (NFSv3's ftype3).
constexpr std::array<const char*, 7> kTypes = {"file",    "directory", "block", "char",
                                               "symlink", "socket",    "fifo"};

const char* field_name(Field field) {
  for (const FieldName& f : kFields) {
    if (f.field == field) return f.name;
  }
  return "?";
}

const char* symbol_of(Comparison comparison) {
  for (const ComparisonName& c : kComparisons) {
    if (c.comparison == comparison) return c.symbol;
  }
  return "?";
}

bool is_time(Field f) {
  return f == Field::accessed || f == Field::modified || f == Field::changed || f == Field::birth;
}
bool is_text(Field f) { return f == Field::path || f == Field::name || f == Field::iname; }

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A number with an optional fraction, then a unit; nullopt when it is not one.
struct Quantity {
  double number = 0;
  std::string unit;
};
std::optional<Quantity> quantity(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  Quantity q;
  const std::string number(text.substr(0, digits));
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), q.number);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(q.number)) {
    return std::nullopt;
  }
  q.unit = std::string(text.substr(digits));
  return q;
}

Result<std::uint64_t> parse_size(std::string_view text) {
  static constexpr std::pair<const char*, double> kUnits[] = {{"", 1},
                                                              {"b", 1},
                                                              {"kb", 1e3},
                                                              {"mb", 1e6},
                                                              {"gb", 1e9},
                                                              {"tb", 1e12},
                                                              {"pb", 1e15},
                                                              {"kib", 1024.0},
                                                              {"mib", 1048576.0},
                                                              {"gib", 1073741824.0},
                                                              {"tib", 1099511627776.0},
                                                              {"pib", 1125899906842624.0}};
  const std::optional<Quantity> q = quantity(text);
  if (q) {
    for (const auto& [unit, factor] : kUnits) {
      if (lower(q->unit) != unit) continue;
      const double bytes = q->number * factor;
      if (bytes < 0 || bytes > 9.0e18) break;
      return static_cast<std::uint64_t>(std::llround(bytes));
    }
  }
  return error(Errc::invalid_argument,
               "expected a size such as 1GiB or 500MB (B, KB, MB, GB, TB, PB or KiB...PiB)");
}

Result<std::int64_t> parse_age(std::string_view text) {
  const std::optional<Quantity> q = quantity(text);
  if (q) {
    constexpr double kDay = 86400;
    // OneFS writes months as M; a lone m could be minutes or months, so it is refused.
    double unit = 0;
    const std::string u = q->unit == "M" ? "mo" : q->unit == "m" ? "?" : lower(q->unit);
    if (u == "s") unit = 1;
    if (u == "min") unit = 60;
    if (u == "h") unit = 3600;
    if (u == "d") unit = kDay;
    if (u == "w") unit = 7 * kDay;
    if (u == "mo") unit = 30 * kDay;
    if (u == "y") unit = 365 * kDay;
    // A century is older than any file; the bound keeps every time in range of the shards'
    // nanosecond columns.
    const double seconds = q->number * unit;
    if (unit > 0 && seconds <= 100 * 365 * kDay) {
      return static_cast<std::int64_t>(std::llround(seconds));
    }
  }
  return error(
      Errc::invalid_argument,
      "expected an age such as 30d (s, min, h, d, w, mo, y; at most 100y) or a date such as "
      "2024-01-31");
}

Result<std::int64_t> parse_moment(std::string_view text) {
  std::tm tm{};
  const std::string s(text);
  const char* end = nullptr;
  if (s.size() == 10) end = strptime(s.c_str(), "%Y-%m-%d", &tm);
  if (s.size() == 20) end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  // The years a shard's nanosecond times hold, and that are written back as they were read.
  if (end == nullptr || *end != '\0' || tm.tm_year < 70 || tm.tm_year > 300) {
    return error(Errc::invalid_argument,
                 "expected a date from 1970 to 2200 as 2024-01-31 or 2024-01-31T12:00:00Z");
  }
  return static_cast<std::int64_t>(timegm(&tm));
}

bool looks_like_date(std::string_view text) {
  return text.size() >= 5 && std::isdigit(static_cast<unsigned char>(text[0])) &&
         std::isdigit(static_cast<unsigned char>(text[3])) && text[4] == '-';
}

// The value a condition on `field` compares with, read from `text`.
Result<Condition> make_condition(Field field, Comparison comparison, std::string_view text) {
  Condition c{field, comparison, {}};
  const bool ordering = comparison == Comparison::lt || comparison == Comparison::le ||
                        comparison == Comparison::gt || comparison == Comparison::ge;
  const bool equality = comparison == Comparison::eq || comparison == Comparison::ne;
  const bool matching = comparison == Comparison::matches || comparison == Comparison::not_matches;
  if (is_text(field)) {
    if (!matching) {
      return error(Errc::invalid_argument,
                   std::string(field_name(field)) + " compares with =~ (matches) or !~ only");
    }
    if (text.empty() || text.size() > kMaxText) {
      return error(Errc::invalid_argument, "expected a pattern of 1 to 4096 characters");
    }
    c.value = std::string(text);
  } else if (is_time(field)) {
    if (!ordering) {
      return error(Errc::invalid_argument, "times compare with <, <=, > or >= only");
    }
    if (looks_like_date(text)) {
      TP_ASSIGN_OR_RETURN(std::int64_t at, parse_moment(text));
      c.value = Moment{at};
    } else {
      TP_ASSIGN_OR_RETURN(std::int64_t seconds, parse_age(text));
      c.value = Age{seconds};
    }
  } else if (field == Field::type) {
    if (!equality) return error(Errc::invalid_argument, "type compares with == or != only");
    const std::string t = lower(text);
    if (std::find_if(kTypes.begin(), kTypes.end(), [&](const char* k) { return t == k; }) ==
        kTypes.end()) {
      return error(Errc::invalid_argument,
                   "expected a type: file, directory, symlink, block, char, socket or fifo");
    }
    c.value = t;
  } else {
    if (matching) {
      return error(Errc::invalid_argument,
                   std::string(field_name(field)) + " compares with <, <=, >, >=, == or !=");
    }
    if (field == Field::size) {
      TP_ASSIGN_OR_RETURN(std::uint64_t bytes, parse_size(text));
      c.value = bytes;
    } else {
      std::uint64_t uid = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), uid);
      if (ec != std::errc() || end != text.data() + text.size() || uid > 0xffffffffu) {
        return error(Errc::invalid_argument, "expected an owner's uid, a number");
      }
      c.value = uid;
    }
  }
  return c;
}

// ---- The readable form ----

struct Token {
  enum Kind { word, quoted, comparison, end } kind = end;
  std::string text;
  std::size_t column = 0;  // 1-based
};

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Result<Token> next() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    Token t;
    t.column = at_ + 1;
    if (at_ == text_.size()) return t;
    for (const ComparisonName& c : kComparisons) {
      const std::string_view symbol = c.symbol;
      if (text_.substr(at_, symbol.size()) == symbol) {
        at_ += symbol.size();
        t.kind = Token::comparison;
        t.text = symbol;
        return t;
      }
    }
    if (text_[at_] == '"') {
      t.kind = Token::quoted;
      for (++at_; at_ < text_.size() && text_[at_] != '"'; ++at_) {
        if (text_[at_] == '\\' && at_ + 1 < text_.size()) ++at_;
        t.text += text_[at_];
      }
      if (at_ == text_.size()) {
        return error(Errc::invalid_argument,
                     "at column " + std::to_string(t.column) + ": a quote that is never closed");
      }
      ++at_;
      return t;
    }
    t.kind = Token::word;
    while (at_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[at_])) &&
           std::string_view("<>=!\"").find(text_[at_]) == std::string_view::npos) {
      t.text += text_[at_++];
    }
    if (t.text.empty()) {
      return error(Errc::invalid_argument, "at column " + std::to_string(t.column) + ": '" +
                                               text_[at_] +
                                               "' is no comparison; quote values that hold it");
    }
    return t;
  }

 private:
  std::string_view text_;
  std::size_t at_ = 0;
};

Status error_at(const Token& t, const std::string& expected) {
  const std::string found = t.kind == Token::end ? "the end" : "'" + t.text + "'";
  return error(Errc::invalid_argument,
               "at column " + std::to_string(t.column) + ": " + expected + ", found " + found);
}

bool is_keyword(const Token& t, const char* keyword) {
  return t.kind == Token::word && lower(t.text) == keyword;
}

// ---- Evaluation ----

// Whether `text` matches `pattern`: ** any characters, * and ? any but '/', the rest itself.
// Dynamic programming over the text, one row a pattern element: no backtracking, so no pattern
// takes longer than its length times the text's.
bool glob_matches(std::string_view pattern, std::string_view text, bool ignore_case) {
  if (text.size() > kMaxText) return false;
  auto same = [ignore_case](char a, char b) {
    return ignore_case ? std::tolower(static_cast<unsigned char>(a)) ==
                             std::tolower(static_cast<unsigned char>(b))
                       : a == b;
  };
  std::vector<bool> row(text.size() + 1, false);
  std::vector<bool> next(text.size() + 1, false);
  row[0] = true;
  for (std::size_t p = 0; p < pattern.size(); ++p) {
    const bool any_depth = pattern[p] == '*' && p + 1 < pattern.size() && pattern[p + 1] == '*';
    next[0] = pattern[p] == '*' && row[0];
    for (std::size_t i = 1; i <= text.size(); ++i) {
      const char c = text[i - 1];
      if (pattern[p] == '*') {
        next[i] = row[i] || (next[i - 1] && (any_depth || c != '/'));
      } else if (pattern[p] == '?') {
        next[i] = row[i - 1] && c != '/';
      } else {
        next[i] = row[i - 1] && same(c, pattern[p]);
      }
    }
    std::swap(row, next);
    if (any_depth) ++p;
  }
  return row[text.size()];
}

template <typename T>
bool compare(T a, Comparison comparison, T b) {
  switch (comparison) {
    case Comparison::lt:
      return a < b;
    case Comparison::le:
      return a <= b;
    case Comparison::gt:
      return a > b;
    case Comparison::ge:
      return a >= b;
    case Comparison::eq:
      return a == b;
    case Comparison::ne:
      return a != b;
    case Comparison::matches:
    case Comparison::not_matches:
      return false;
  }
  return false;
}

std::int64_t time_of(Field field, const FileFacts& f) {
  switch (field) {
    case Field::accessed:
      return f.atime;
    case Field::modified:
      return f.mtime;
    case Field::changed:
      return f.ctime;
    default:
      return f.birth;
  }
}

bool holds(const Condition& c, const FileFacts& f, std::int64_t now) {
  if (is_text(c.field)) {
    std::string_view subject = f.path;
    if (c.field != Field::path) subject = subject.substr(subject.rfind('/') + 1);
    // Too long to match against: neither =~ nor !~ holds, so no policy acts on it by a name.
    if (subject.size() > kMaxText) return false;
    const bool matched =
        glob_matches(std::get<std::string>(c.value), subject, c.field == Field::iname);
    return matched == (c.comparison == Comparison::matches);
  }
  if (is_time(c.field)) {
    const std::int64_t t = time_of(c.field, f);
    if (const Age* age = std::get_if<Age>(&c.value))
      return compare(now - t, c.comparison, age->seconds);
    return compare(t, c.comparison, std::get<Moment>(c.value).unix_seconds);
  }
  if (c.field == Field::type) return compare(f.type, c.comparison, std::get<std::string>(c.value));
  if (c.field == Field::size)
    return compare(f.size, c.comparison, std::get<std::uint64_t>(c.value));
  return compare(std::uint64_t{f.uid}, c.comparison, std::get<std::uint64_t>(c.value));
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

// In the largest unit that says it exactly.
std::string size_text(std::uint64_t bytes) {
  static constexpr std::pair<std::uint64_t, const char*> kUnits[] = {
      {1ull << 50, "PiB"}, {1'000'000'000'000'000ull, "PB"},
      {1ull << 40, "TiB"}, {1'000'000'000'000ull, "TB"},
      {1ull << 30, "GiB"}, {1'000'000'000ull, "GB"},
      {1ull << 20, "MiB"}, {1'000'000ull, "MB"},
      {1ull << 10, "KiB"}, {1'000ull, "KB"}};
  for (const auto& [unit, name] : kUnits) {
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + name;
  }
  return std::to_string(bytes);
}

std::string age_text(std::int64_t seconds) {
  static constexpr std::pair<std::int64_t, const char*> kUnits[] = {
      {365 * 86400, "y"}, {7 * 86400, "w"}, {86400, "d"}, {3600, "h"}, {60, "min"}};
  for (const auto& [unit, name] : kUnits) {
    if (seconds != 0 && seconds % unit == 0) return std::to_string(seconds / unit) + name;
  }
  return std::to_string(seconds) + "s";
}

std::string moment_text(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

const char* column_of(Field field) {
  switch (field) {
    case Field::accessed:
      return "atime";
    case Field::modified:
      return "mtime";
    case Field::changed:
      return "ctime";
    case Field::birth:
      return "birth";
    case Field::size:
      return "size";
    case Field::type:
      return "type";
    case Field::owner:
      return "uid";
    default:
      return nullptr;
  }
}

// `seconds op threshold` for a column of nanoseconds, whose whole seconds are what compares.
std::pair<const char*, std::int64_t> in_nanoseconds(Comparison comparison, std::int64_t threshold) {
  constexpr std::int64_t kNs = 1'000'000'000;
  switch (comparison) {
    case Comparison::lt:
      return {"<", threshold * kNs};
    case Comparison::le:
      return {"<", (threshold + 1) * kNs};
    case Comparison::gt:
      return {">=", (threshold + 1) * kNs};
    default:
      return {">=", threshold * kNs};
  }
}

Comparison flipped(Comparison comparison) {
  switch (comparison) {
    case Comparison::lt:
      return Comparison::gt;
    case Comparison::le:
      return Comparison::ge;
    case Comparison::gt:
      return Comparison::lt;
    case Comparison::ge:
      return Comparison::le;
    default:
      return comparison;
  }
}

}  // namespace

const char* type_name(unsigned ftype) {
  return ftype >= 1 && ftype <= kTypes.size() ? kTypes[ftype - 1] : "unknown";
}

Result<Filter> parse_expression(std::string_view text) {
  if (text.size() > kMaxText) {
    return error(Errc::invalid_argument, "a filter is at most 4096 characters");
  }
  Lexer lexer(text);
  Filter filter;
  filter.clauses.emplace_back();
  std::size_t conditions = 0;
  TP_ASSIGN_OR_RETURN(Token t, lexer.next());
  if (t.kind == Token::end) return error_at(t, "expected a condition such as size > 1GiB");
  for (;;) {
    if (t.kind != Token::word) return error_at(t, "expected a field (path, name, size, ...)");
    const std::string name = lower(t.text);
    const FieldName* field = std::find_if(std::begin(kFields), std::end(kFields),
                                          [&](const FieldName& f) { return name == f.name; });
    if (field == std::end(kFields)) {
      return error_at(t,
                      "expected a field: path, name, iname, size, accessed, modified, "
                      "changed, birth, type or owner");
    }
    TP_ASSIGN_OR_RETURN(Token op, lexer.next());
    const ComparisonName* comparison =
        std::find_if(std::begin(kComparisons), std::end(kComparisons),
                     [&](const ComparisonName& c) { return op.text == c.symbol; });
    if (op.kind != Token::comparison || comparison == std::end(kComparisons)) {
      return error_at(op, "expected a comparison: < <= > >= == != =~ !~");
    }
    TP_ASSIGN_OR_RETURN(Token value, lexer.next());
    if (value.kind != Token::word && value.kind != Token::quoted) {
      return error_at(value, std::string("expected a value for ") + field->name);
    }
    auto condition = make_condition(field->field, comparison->comparison, value.text);
    if (!condition.ok()) return error_at(value, condition.status().message());
    if (++conditions > kMaxConditions) {
      return error_at(value, "at most 256 conditions in a filter");
    }
    filter.clauses.back().push_back(std::move(condition).value());
    TP_ASSIGN_OR_RETURN(t, lexer.next());
    if (t.kind == Token::end) return filter;
    if (is_keyword(t, "or")) {
      filter.clauses.emplace_back();
    } else if (!is_keyword(t, "and")) {
      return error_at(t, "expected 'and', 'or' or the end");
    }
    TP_ASSIGN_OR_RETURN(t, lexer.next());
  }
}

Result<Filter> parse_flags(std::span<const std::string> arguments) {
  auto failure = [&](std::size_t i, const std::string& what) {
    const std::string found = i < arguments.size() ? "'" + arguments[i] + "'" : "the end";
    return error(Errc::invalid_argument,
                 "argument " + std::to_string(i + 1) + ": " + what + ", found " + found);
  };
  if (arguments.empty() || arguments.front() != "--begin-filter") {
    return failure(0, "expected --begin-filter");
  }
  struct Flag {
    const char* name;
    Field field;
  };
  static constexpr Flag kFlags[] = {
      {"--path", Field::path},
      {"--name", Field::name},
      {"--size", Field::size},
      {"--accessed-time", Field::accessed},
      {"--modified-time", Field::modified},
      {"--changed-time", Field::changed},
      {"--birth-time", Field::birth},
      {"--file-type", Field::type},
      {"--owner", Field::owner},
  };
  Filter filter;
  filter.clauses.emplace_back();
  std::size_t conditions = 0;
  std::size_t i = 1;
  for (;;) {
    if (i >= arguments.size()) return failure(i, "expected a condition or --end-filter");
    const std::string& argument = arguments[i];
    const std::size_t equals = argument.find('=');
    const std::string flag = argument.substr(0, equals);
    const Flag* known = std::find_if(std::begin(kFlags), std::end(kFlags),
                                     [&](const Flag& f) { return flag == f.name; });
    if (known == std::end(kFlags) || equals == std::string::npos) {
      return failure(i, "expected a condition such as --size=1GB or --accessed-time=30D");
    }
    const std::string value = argument.substr(equals + 1);
    Field field = known->field;
    std::string op = "eq";
    for (++i; i < arguments.size(); ++i) {
      if (arguments[i].rfind("--operator=", 0) == 0) {
        op = arguments[i].substr(11);
      } else if (arguments[i] == "--case-sensitive=false" && field == Field::name) {
        field = Field::iname;
      } else if (arguments[i] != "--case-sensitive=true" || field != Field::name) {
        break;
      }
    }
    const ComparisonName* comparison =
        std::find_if(std::begin(kComparisons), std::end(kComparisons),
                     [&](const ComparisonName& c) { return op == c.onefs && *c.onefs != '\0'; });
    if (comparison == std::end(kComparisons)) {
      return failure(i - 1, "expected --operator=lt, le, gt, ge, eq or ne");
    }
    Comparison how = comparison->comparison;
    std::string pattern = value;
    if (is_text(field)) {
      if (how != Comparison::eq && how != Comparison::ne) {
        return failure(i - 1, "paths and names take --operator=eq or ne");
      }
      how = how == Comparison::eq ? Comparison::matches : Comparison::not_matches;
      // A path without a wildcard is a directory: the files under it.
      if (field == Field::path && pattern.find_first_of("*?") == std::string::npos) {
        while (pattern.size() > 1 && pattern.back() == '/') pattern.pop_back();
        pattern += pattern == "/" ? "**" : "/**";
      }
    }
    auto condition = make_condition(field, how, pattern);
    if (!condition.ok()) return failure(i - 1, condition.status().message());
    if (++conditions > kMaxConditions) return failure(i - 1, "at most 256 conditions");
    filter.clauses.back().push_back(std::move(condition).value());
    if (i >= arguments.size()) return failure(i, "expected --and, --or or --end-filter");
    if (arguments[i] == "--end-filter") {
      if (i + 1 != arguments.size()) return failure(i + 1, "expected nothing after --end-filter");
      return filter;
    }
    if (arguments[i] == "--or") {
      filter.clauses.emplace_back();
    } else if (arguments[i] != "--and") {
      return failure(i, "expected --and, --or or --end-filter");
    }
    ++i;
  }
}

bool matches(const Filter& filter, const FileFacts& facts, std::int64_t now) {
  if (filter.clauses.empty()) return true;
  return std::any_of(filter.clauses.begin(), filter.clauses.end(), [&](const Clause& clause) {
    return std::all_of(clause.begin(), clause.end(),
                       [&](const Condition& c) { return holds(c, facts, now); });
  });
}

std::string to_expression(const Filter& filter) {
  std::string out;
  for (const Clause& clause : filter.clauses) {
    if (!out.empty()) out += " or ";
    for (std::size_t i = 0; i < clause.size(); ++i) {
      const Condition& c = clause[i];
      if (i > 0) out += " and ";
      out += field_name(c.field);
      out += ' ';
      out += symbol_of(c.comparison);
      out += ' ';
      if (const auto* number = std::get_if<std::uint64_t>(&c.value)) {
        out += c.field == Field::size ? size_text(*number) : std::to_string(*number);
      } else if (const Age* age = std::get_if<Age>(&c.value)) {
        out += age_text(age->seconds);
      } else if (const Moment* moment = std::get_if<Moment>(&c.value)) {
        out += moment_text(moment->unix_seconds);
      } else {
        out += quoted(std::get<std::string>(c.value));
      }
    }
  }
  return out;
}

SqlPredicate to_sql(const Filter& filter, std::int64_t now) {
  SqlPredicate sql;
  if (filter.clauses.empty()) {
    sql.where = "1";
    return sql;
  }
  std::string where;
  for (const Clause& clause : filter.clauses) {
    std::string conjunction;
    for (const Condition& c : clause) {
      const char* column = column_of(c.field);
      if (column == nullptr) {
        sql.exact = false;  // path and names: no column here
        continue;
      }
      std::string term = std::string(column) + " ";
      std::int64_t value = 0;
      if (is_time(c.field)) {
        // An age compares now - t; a moment, t itself.
        const Age* age = std::get_if<Age>(&c.value);
        const Comparison on_time = age ? flipped(c.comparison) : c.comparison;
        const std::int64_t threshold =
            age ? now - age->seconds : std::get<Moment>(c.value).unix_seconds;
        auto [op, ns] = in_nanoseconds(on_time, threshold);
        term += op;
        value = ns;
      } else {
        term += symbol_of(c.comparison) == std::string("==") ? "=" : symbol_of(c.comparison);
        if (c.field == Field::type) {
          const std::string& t = std::get<std::string>(c.value);
          value =
              std::find_if(kTypes.begin(), kTypes.end(), [&](const char* k) { return t == k; }) -
              kTypes.begin() + 1;
        } else {
          value = static_cast<std::int64_t>(
              std::min<std::uint64_t>(std::get<std::uint64_t>(c.value), INT64_MAX));
        }
      }
      sql.values.push_back(value);
      term += " ?" + std::to_string(sql.values.size());
      conjunction += (conjunction.empty() ? "" : " AND ") + term;
    }
    where +=
        (where.empty() ? "" : " OR ") + ("(" + (conjunction.empty() ? "1" : conjunction) + ")");
  }
  sql.where = std::move(where);
  return sql;
}

}  // namespace tidepool::policy

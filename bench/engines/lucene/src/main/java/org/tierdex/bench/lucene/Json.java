package org.tierdex.bench.lucene;

/** Minimal JSON output helpers (the engine only writes flat objects). */
final class Json {
  private Json() {}

  private static final char[] HEX = "0123456789abcdef".toCharArray();

  /** Appends {@code s} as a JSON string literal (quotes included). */
  static void string(StringBuilder out, String s) {
    out.append('"');
    int n = s.length();
    int start = 0;
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      String rep;
      if (c >= 0x20 && c != '"' && c != '\\' && c != 0x2028 && c != 0x2029) {
        if (Character.isSurrogate(c)) {
          // A lone surrogate cannot be encoded in UTF-8: escape it so the output stays valid.
          boolean paired =
              Character.isHighSurrogate(c)
                  && i + 1 < n
                  && Character.isLowSurrogate(s.charAt(i + 1));
          if (paired) {
            i++;
            continue;
          }
        } else {
          continue;
        }
        rep = null;
      } else {
        rep =
            switch (c) {
              case '"' -> "\\\"";
              case '\\' -> "\\\\";
              case '\n' -> "\\n";
              case '\r' -> "\\r";
              case '\t' -> "\\t";
              case '\b' -> "\\b";
              case '\f' -> "\\f";
              default -> null;
            };
      }
      out.append(s, start, i);
      if (rep != null) {
        out.append(rep);
      } else {
        out.append("\\u")
            .append(HEX[(c >> 12) & 0xF])
            .append(HEX[(c >> 8) & 0xF])
            .append(HEX[(c >> 4) & 0xF])
            .append(HEX[c & 0xF]);
      }
      start = i + 1;
    }
    out.append(s, start, n);
    out.append('"');
  }

  /** Appends a float as a JSON number (shortest round-trip form; non-finite as null). */
  static void number(StringBuilder out, float f) {
    if (Float.isFinite(f)) {
      out.append(f);
    } else {
      out.append("null");
    }
  }

  /** {@code {"error": msg, "elapsed_us": 0}}. */
  static String error(String message) {
    StringBuilder sb = new StringBuilder(64 + message.length());
    sb.append("{\"error\":");
    string(sb, message);
    sb.append(",\"elapsed_us\":0}");
    return sb.toString();
  }
}

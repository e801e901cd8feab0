package org.tierdex.bench.lucene;

import java.util.ArrayList;
import java.util.List;
import org.apache.lucene.document.DoubleField;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.KeywordField;
import org.apache.lucene.document.LongField;
import org.apache.lucene.index.IndexableField;

/**
 * The protocol's typed fields (bench/PROTOCOL.md): {@code category} and {@code tags} keywords,
 * {@code date} (epoch milliseconds), {@code price} (double) and {@code popularity} (long), and the
 * ISO-8601 date grammar shared by corpus and queries.
 */
final class Typed {
  private Typed() {}

  /** What a typed field holds. */
  enum Kind {
    KEYWORD,
    LONG,
    DOUBLE,
    DATE
  }

  static final String CATEGORY = "category";
  static final String TAGS = "tags";
  static final String DATE = "date";
  static final String PRICE = "price";
  static final String POPULARITY = "popularity";

  /** The kind of a typed field, or null when {@code name} is not one. */
  static Kind kind(String name) {
    return switch (name) {
      case CATEGORY, TAGS -> Kind.KEYWORD;
      case DATE -> Kind.DATE;
      case PRICE -> Kind.DOUBLE;
      case POPULARITY -> Kind.LONG;
      default -> null;
    };
  }

  /** The typed values of one record (reused per record). */
  static final class Values {
    final List<String> categories = new ArrayList<>(1);
    final List<String> tags = new ArrayList<>(5);
    boolean hasDate;
    long dateMillis;
    boolean hasPrice;
    double price;
    boolean hasPopularity;
    long popularity;

    void clear() {
      categories.clear();
      tags.clear();
      hasDate = false;
      hasPrice = false;
      hasPopularity = false;
    }

    /** Adds the Lucene fields of these values to {@code out}. */
    void addFields(List<IndexableField> out) {
      for (String c : categories) {
        out.add(new KeywordField(CATEGORY, c, Field.Store.NO));
      }
      for (String t : tags) {
        out.add(new KeywordField(TAGS, t, Field.Store.NO));
      }
      if (hasDate) {
        out.add(new LongField(DATE, dateMillis, Field.Store.NO));
      }
      if (hasPrice) {
        out.add(new DoubleField(PRICE, price, Field.Store.NO));
      }
      if (hasPopularity) {
        out.add(new LongField(POPULARITY, popularity, Field.Store.NO));
      }
    }
  }

  /**
   * Epoch milliseconds of {@code YYYY-MM-DD} or {@code YYYY-MM-DDTHH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM]}
   * (no zone = UTC; fraction truncated to milliseconds).
   *
   * @throws IllegalArgumentException when {@code s} is not such a date
   */
  static long parseDate(String s) {
    int n = s.length();
    if (n < 10 || s.charAt(4) != '-' || s.charAt(7) != '-') {
      throw badDate(s);
    }
    int y = digits(s, 0, 4);
    int mo = digits(s, 5, 2);
    int d = digits(s, 8, 2);
    if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) {
      throw badDate(s);
    }
    long millis = daysFromCivil(y, mo, d) * 86_400_000L;
    if (n == 10) {
      return millis;
    }
    if (n < 19 || s.charAt(10) != 'T' || s.charAt(13) != ':' || s.charAt(16) != ':') {
      throw badDate(s);
    }
    int hh = digits(s, 11, 2);
    int mm = digits(s, 14, 2);
    int ss = digits(s, 17, 2);
    if (hh > 23 || mm > 59 || ss > 59) {
      throw badDate(s);
    }
    int i = 19;
    long ms = 0;
    if (i < n && s.charAt(i) == '.') {
      int start = ++i;
      while (i < n && isDigit(s.charAt(i))) {
        i++;
      }
      int k = i - start;
      if (k < 1 || k > 9) {
        throw badDate(s);
      }
      for (int j = 0; j < 3; j++) {
        ms = ms * 10 + (j < k ? s.charAt(start + j) - '0' : 0);
      }
    }
    long offset = 0;
    if (i < n) {
      char c = s.charAt(i);
      if (c == 'Z') {
        i++;
      } else if ((c == '+' || c == '-') && i + 6 == n && s.charAt(i + 3) == ':') {
        int oh = digits(s, i + 1, 2);
        int om = digits(s, i + 4, 2);
        if (oh > 23 || om > 59) {
          throw badDate(s);
        }
        offset = (oh * 60L + om) * 60_000L * (c == '+' ? 1 : -1);
        i += 6;
      } else {
        throw badDate(s);
      }
    }
    if (i != n) {
      throw badDate(s);
    }
    return millis + hh * 3_600_000L + mm * 60_000L + ss * 1000L + ms - offset;
  }

  private static IllegalArgumentException badDate(String s) {
    return new IllegalArgumentException(
        "bad date \"" + s + "\" (expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM])");
  }

  private static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  private static int digits(String s, int at, int len) {
    int v = 0;
    for (int i = at; i < at + len; i++) {
      char c = s.charAt(i);
      if (!isDigit(c)) {
        throw badDate(s);
      }
      v = v * 10 + (c - '0');
    }
    return v;
  }

  private static boolean leap(int y) {
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
  }

  private static int daysInMonth(int y, int m) {
    return switch (m) {
      case 2 -> leap(y) ? 29 : 28;
      case 4, 6, 9, 11 -> 30;
      default -> 31;
    };
  }

  /** Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
  static long daysFromCivil(long y, long m, long d) {
    y -= m <= 2 ? 1 : 0;
    long era = Math.floorDiv(y, 400);
    long yoe = y - era * 400;
    long doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146_097 + doe - 719_468;
  }
}

package org.tierdex.bench.lucene;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.lucene.document.DoubleField;
import org.apache.lucene.document.LongField;
import org.apache.lucene.index.Term;
import org.apache.lucene.queryparser.classic.MultiFieldQueryParser;
import org.apache.lucene.queryparser.classic.ParseException;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.ConstantScoreQuery;
import org.apache.lucene.search.FieldExistsQuery;
import org.apache.lucene.search.MatchAllDocsQuery;
import org.apache.lucene.search.MatchNoDocsQuery;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.SortField;
import org.apache.lucene.search.SortedNumericSelector;
import org.apache.lucene.search.SortedNumericSortField;
import org.apache.lucene.search.SortedSetSelector;
import org.apache.lucene.search.SortedSetSortField;
import org.apache.lucene.search.TermInSetQuery;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.TermRangeQuery;
import org.apache.lucene.util.BytesRef;

/**
 * The protocol's structured queries (bench/PROTOCOL.md, "Structured (JSON) queries"): an
 * Elasticsearch request-body subset, {@code {"query": Q, "sort": [...]}}, turned into a Lucene
 * {@link Query} and {@link Sort}.
 */
final class JsonQuery {
  /** A bad request: the message is the answer's error. */
  static final class BadQuery extends Exception {
    private static final long serialVersionUID = 1L;

    BadQuery(String message) {
      super(message);
    }
  }

  /** JSON null in a parsed tree. */
  static final Object NULL = new Object();

  private static final JsonFactory JSON = new JsonFactory();

  final Query query;
  /** Null without a sort. */
  final Sort sort;
  /** Null without {@code aggs}. */
  Aggs aggs;

  private JsonQuery(Query query, Sort sort) {
    this.query = query;
    this.sort = sort;
  }

  /** Parses a request; {@code parser} turns {@code query_string} text into a query. */
  static JsonQuery parse(String text, MultiFieldQueryParser parser) throws BadQuery {
    Object tree;
    try (JsonParser p = JSON.createParser(text)) {
      tree = read(p, p.nextToken());
      if (p.nextToken() != null) {
        throw new BadQuery("trailing characters after the JSON object");
      }
    } catch (JsonProcessingException e) {
      throw new BadQuery("invalid JSON: " + e.getOriginalMessage());
    } catch (IOException e) {
      throw new BadQuery("invalid JSON: " + e.getMessage());
    }
    Map<String, Object> request = object(tree, "the request");
    for (String key : request.keySet()) {
      if (!List.of("query", "sort", "aggs", "aggregations").contains(key)) {
        throw new BadQuery("unknown key `" + key + "` in the request (expected query, sort, aggs)");
      }
    }
    if (!request.containsKey("query")) {
      throw new BadQuery("the request has no `query`");
    }
    if (request.containsKey("aggs") && request.containsKey("aggregations")) {
      throw new BadQuery("both `aggs` and `aggregations` in the request");
    }
    Object aggTree = request.containsKey("aggs") ? request.get("aggs") : request.get("aggregations");
    Aggs aggs = aggTree == null ? null : Aggs.parse(aggTree);
    JsonQuery out = parseRequest(request, parser);
    out.aggs = aggs;
    return out;
  }

  private static JsonQuery parseRequest(Map<String, Object> request, MultiFieldQueryParser parser)
      throws BadQuery {
    Query q = new Builder(parser).query(request.get("query"));
    Object s = request.get("sort");
    if (s == null) {
      return new JsonQuery(q, null);
    }
    List<Object> keys = s instanceof List<?> ? list(s) : List.of(s);
    if (keys.isEmpty()) {
      return new JsonQuery(q, null);
    }
    SortField[] fields = new SortField[keys.size()];
    for (int i = 0; i < fields.length; i++) {
      Object k = keys.get(i);
      String name;
      String order = null;
      if (k instanceof String str) {
        name = str;
      } else {
        Map<String, Object> m = object(k, "a sort key");
        if (m.size() != 1) {
          throw new BadQuery("a sort key names one field");
        }
        Map.Entry<String, Object> e = m.entrySet().iterator().next();
        name = e.getKey();
        Object o = e.getValue();
        if (o instanceof String str) {
          order = str;
        } else {
          Map<String, Object> opts = object(o, "sort options of `" + name + "`");
          for (String key : opts.keySet()) {
            if (!key.equals("order")) {
              throw new BadQuery("unknown sort option `" + key + "` (expected order)");
            }
          }
          order = string(opts.get("order"), "order");
        }
      }
      boolean desc;
      if (order == null) {
        desc = name.equals("_score");
      } else if (order.equals("asc")) {
        desc = false;
      } else if (order.equals("desc")) {
        desc = true;
      } else {
        throw new BadQuery("sort order must be asc or desc, got `" + order + "`");
      }
      if (name.equals("_score")) {
        // Score's natural order is descending.
        fields[i] = new SortField(null, SortField.Type.SCORE, !desc);
        continue;
      }
      Typed.Kind kind = Typed.kind(name);
      if (kind == null || name.equals(Typed.TAGS)) {
        throw new BadQuery(
            "cannot sort by `" + name + "` (sortable: _score, date, price, popularity, category)");
      }
      // Missing values last in both directions (the comparator's reverse also reverses them).
      switch (kind) {
        case KEYWORD -> {
          SortedSetSortField f =
              new SortedSetSortField(
                  name, desc, desc ? SortedSetSelector.Type.MAX : SortedSetSelector.Type.MIN);
          f.setMissingValue(desc ? SortField.STRING_FIRST : SortField.STRING_LAST);
          fields[i] = f;
        }
        case LONG, DATE -> {
          SortedNumericSortField f =
              new SortedNumericSortField(
                  name,
                  SortField.Type.LONG,
                  desc,
                  desc ? SortedNumericSelector.Type.MAX : SortedNumericSelector.Type.MIN);
          f.setMissingValue(desc ? Long.MIN_VALUE : Long.MAX_VALUE);
          fields[i] = f;
        }
        case DOUBLE -> {
          SortedNumericSortField f =
              new SortedNumericSortField(
                  name,
                  SortField.Type.DOUBLE,
                  desc,
                  desc ? SortedNumericSelector.Type.MAX : SortedNumericSelector.Type.MIN);
          f.setMissingValue(desc ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY);
          fields[i] = f;
        }
      }
    }
    return new JsonQuery(q, new Sort(fields));
  }

  /** Appends sort value {@code v} as JSON; the missing-value sentinels print as null. */
  static void sortValue(StringBuilder b, Object v) {
    if (v == null) {
      b.append("null");
    } else if (v instanceof BytesRef br) {
      Json.string(b, br.utf8ToString());
    } else if (v instanceof Long l) {
      if (l == Long.MIN_VALUE || l == Long.MAX_VALUE) {
        b.append("null");
      } else {
        b.append(l.longValue());
      }
    } else if (v instanceof Double d) {
      if (d.isInfinite() || d.isNaN()) {
        b.append("null");
      } else {
        b.append(d.doubleValue());
      }
    } else if (v instanceof Float f) {
      Json.number(b, f);
    } else {
      Json.string(b, String.valueOf(v));
    }
  }

  /** Turns query trees into Lucene queries. */
  private static final class Builder {
    private final MultiFieldQueryParser parser;

    Builder(MultiFieldQueryParser parser) {
      this.parser = parser;
    }

    Query query(Object tree) throws BadQuery {
      Map<String, Object> m = object(tree, "a query");
      if (m.size() != 1) {
        throw new BadQuery("a query is an object with one key, got " + m.keySet());
      }
      Map.Entry<String, Object> e = m.entrySet().iterator().next();
      String type = e.getKey();
      Object body = e.getValue();
      switch (type) {
        case "query_string" -> {
          Map<String, Object> o = object(body, "query_string");
          for (String key : o.keySet()) {
            if (!key.equals("query")) {
              throw new BadQuery("unknown query_string option `" + key + "`");
            }
          }
          String text = string(o.get("query"), "query_string.query");
          try {
            return parser.parse(text);
          } catch (ParseException | RuntimeException ex) {
            throw new BadQuery("cannot parse query_string: " + firstLine(ex.getMessage()));
          }
        }
        case "match_all" -> {
          if (!object(body, "match_all").isEmpty()) {
            throw new BadQuery("match_all takes no options");
          }
          return new MatchAllDocsQuery();
        }
        case "term" -> {
          Map.Entry<String, Object> f = single(body, "term");
          return constant(exact(f.getKey(), f.getValue()));
        }
        case "terms" -> {
          Map.Entry<String, Object> f = single(body, "terms");
          return constant(set(f.getKey(), list(f.getValue())));
        }
        case "range" -> {
          Map.Entry<String, Object> f = single(body, "range");
          return constant(range(f.getKey(), object(f.getValue(), "range bounds")));
        }
        case "exists" -> {
          Map<String, Object> o = object(body, "exists");
          if (o.size() != 1 || !o.containsKey("field")) {
            throw new BadQuery("exists takes {\"field\": NAME}");
          }
          String field = string(o.get("field"), "exists.field");
          typed(field);
          return constant(new FieldExistsQuery(field));
        }
        case "bool" -> {
          return bool(object(body, "bool"));
        }
        default -> throw new BadQuery("unknown query type `" + type + "`");
      }
    }

    private Query bool(Map<String, Object> o) throws BadQuery {
      BooleanQuery.Builder b = new BooleanQuery.Builder();
      boolean positive = false;
      for (Map.Entry<String, Object> e : o.entrySet()) {
        BooleanClause.Occur occur =
            switch (e.getKey()) {
              case "must" -> BooleanClause.Occur.MUST;
              case "should" -> BooleanClause.Occur.SHOULD;
              case "filter" -> BooleanClause.Occur.FILTER;
              case "must_not" -> BooleanClause.Occur.MUST_NOT;
              default -> throw new BadQuery("unknown bool clause `" + e.getKey() + "`");
            };
        Object v = e.getValue();
        List<Object> clauses = v instanceof List<?> ? list(v) : List.of(v);
        for (Object c : clauses) {
          b.add(query(c), occur);
          positive |= occur != BooleanClause.Occur.MUST_NOT;
        }
      }
      if (!positive) {
        // Only exclusions (or nothing): everything else matches, with score 0.
        b.add(new MatchAllDocsQuery(), BooleanClause.Occur.FILTER);
      }
      return b.build();
    }
  }

  private static Query constant(Query q) {
    return q instanceof MatchNoDocsQuery ? q : new ConstantScoreQuery(q);
  }

  private static Typed.Kind typed(String field) throws BadQuery {
    Typed.Kind k = Typed.kind(field);
    if (k == null) {
      throw new BadQuery(
          "`" + field + "` is not a typed field (category, tags, date, price, popularity)");
    }
    return k;
  }

  private static Query exact(String field, Object v) throws BadQuery {
    return switch (typed(field)) {
      case KEYWORD -> new TermQuery(new Term(field, keyword(field, v)));
      case LONG -> LongField.newExactQuery(field, longValue(field, v));
      case DATE -> LongField.newExactQuery(field, dateValue(field, v));
      case DOUBLE -> DoubleField.newExactQuery(field, doubleValue(field, v));
    };
  }

  private static Query set(String field, List<Object> values) throws BadQuery {
    Typed.Kind kind = typed(field);
    if (values.isEmpty()) {
      return new MatchNoDocsQuery();
    }
    switch (kind) {
      case KEYWORD -> {
        List<BytesRef> terms = new ArrayList<>(values.size());
        for (Object v : values) {
          terms.add(new BytesRef(keyword(field, v)));
        }
        return new TermInSetQuery(field, terms);
      }
      case LONG, DATE -> {
        long[] xs = new long[values.size()];
        for (int i = 0; i < xs.length; i++) {
          Object v = values.get(i);
          xs[i] = kind == Typed.Kind.DATE ? dateValue(field, v) : longValue(field, v);
        }
        return LongField.newSetQuery(field, xs);
      }
      default -> {
        double[] xs = new double[values.size()];
        for (int i = 0; i < xs.length; i++) {
          xs[i] = doubleValue(field, values.get(i));
        }
        return DoubleField.newSetQuery(field, xs);
      }
    }
  }

  private static Query range(String field, Map<String, Object> bounds) throws BadQuery {
    Typed.Kind kind = typed(field);
    Object gte = null;
    Object gt = null;
    Object lte = null;
    Object lt = null;
    for (Map.Entry<String, Object> e : bounds.entrySet()) {
      switch (e.getKey()) {
        case "gte" -> gte = e.getValue();
        case "gt" -> gt = e.getValue();
        case "lte" -> lte = e.getValue();
        case "lt" -> lt = e.getValue();
        default -> throw new BadQuery("unknown range bound `" + e.getKey() + "`");
      }
    }
    if ((gte != null && gt != null) || (lte != null && lt != null)) {
      throw new BadQuery("a range has at most one lower and one upper bound");
    }
    if (gte == null && gt == null && lte == null && lt == null) {
      return new FieldExistsQuery(field);
    }
    switch (kind) {
      case KEYWORD -> {
        String lo = gte != null ? keyword(field, gte) : gt != null ? keyword(field, gt) : null;
        String hi = lte != null ? keyword(field, lte) : lt != null ? keyword(field, lt) : null;
        return TermRangeQuery.newStringRange(field, lo, hi, gt == null, lt == null);
      }
      case LONG, DATE -> {
        boolean date = kind == Typed.Kind.DATE;
        long lo = Long.MIN_VALUE;
        long hi = Long.MAX_VALUE;
        if (gte != null) {
          lo = date ? dateValue(field, gte) : longValue(field, gte);
        } else if (gt != null) {
          long x = date ? dateValue(field, gt) : longValue(field, gt);
          if (x == Long.MAX_VALUE) {
            return new MatchNoDocsQuery();
          }
          lo = x + 1;
        }
        if (lte != null) {
          hi = date ? dateValue(field, lte) : longValue(field, lte);
        } else if (lt != null) {
          long x = date ? dateValue(field, lt) : longValue(field, lt);
          if (x == Long.MIN_VALUE) {
            return new MatchNoDocsQuery();
          }
          hi = x - 1;
        }
        return lo > hi ? new MatchNoDocsQuery() : LongField.newRangeQuery(field, lo, hi);
      }
      default -> {
        double lo = Double.NEGATIVE_INFINITY;
        double hi = Double.POSITIVE_INFINITY;
        if (gte != null) {
          lo = doubleValue(field, gte);
        } else if (gt != null) {
          lo = Math.nextUp(doubleValue(field, gt));
        }
        if (lte != null) {
          hi = doubleValue(field, lte);
        } else if (lt != null) {
          hi = Math.nextDown(doubleValue(field, lt));
        }
        return lo > hi ? new MatchNoDocsQuery() : DoubleField.newRangeQuery(field, lo, hi);
      }
    }
  }

  private static String keyword(String field, Object v) throws BadQuery {
    if (v instanceof String s) {
      return s;
    }
    throw new BadQuery("`" + field + "` takes strings, got " + describe(v));
  }

  private static long longValue(String field, Object v) throws BadQuery {
    if (v instanceof Long l) {
      return l;
    }
    throw new BadQuery("`" + field + "` takes integers, got " + describe(v));
  }

  private static double doubleValue(String field, Object v) throws BadQuery {
    if (v instanceof Long l) {
      return l.doubleValue();
    }
    if (v instanceof Double d) {
      return d;
    }
    throw new BadQuery("`" + field + "` takes numbers, got " + describe(v));
  }

  private static long dateValue(String field, Object v) throws BadQuery {
    if (v instanceof Long l) {
      return l;
    }
    if (v instanceof String s) {
      try {
        return Typed.parseDate(s);
      } catch (IllegalArgumentException e) {
        throw new BadQuery(e.getMessage());
      }
    }
    throw new BadQuery(
        "`" + field + "` takes ISO-8601 strings or epoch milliseconds, got " + describe(v));
  }

  private static String describe(Object v) {
    if (v == NULL) {
      return "null";
    }
    if (v instanceof String s) {
      return "the string \"" + s + "\"";
    }
    if (v instanceof List<?>) {
      return "an array";
    }
    if (v instanceof Map<?, ?>) {
      return "an object";
    }
    return String.valueOf(v);
  }

  private static Map.Entry<String, Object> single(Object body, String what) throws BadQuery {
    Map<String, Object> o = object(body, what);
    if (o.size() != 1) {
      throw new BadQuery(what + " names one field, got " + o.keySet());
    }
    return o.entrySet().iterator().next();
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> object(Object v, String what) throws BadQuery {
    if (v instanceof Map<?, ?> m) {
      return (Map<String, Object>) m;
    }
    throw new BadQuery(what + " must be a JSON object, got " + describe(v));
  }

  @SuppressWarnings("unchecked")
  private static List<Object> list(Object v) throws BadQuery {
    if (v instanceof List<?> l) {
      return (List<Object>) l;
    }
    throw new BadQuery("expected a JSON array, got " + describe(v));
  }

  private static String string(Object v, String what) throws BadQuery {
    if (v instanceof String s) {
      return s;
    }
    throw new BadQuery(what + " must be a string, got " + (v == null ? "nothing" : describe(v)));
  }

  /**
   * Reads one JSON value starting at token {@code t}: objects as ordered maps (a duplicate key is
   * an error), arrays as lists, integers as Long, other numbers as Double.
   */
  private static Object read(JsonParser p, JsonToken t) throws IOException, BadQuery {
    if (t == null) {
      throw new BadQuery("empty query");
    }
    switch (t) {
      case START_OBJECT -> {
        Map<String, Object> m = new LinkedHashMap<>();
        JsonToken k;
        while ((k = p.nextToken()) == JsonToken.FIELD_NAME) {
          String name = p.currentName();
          Object v = read(p, p.nextToken());
          if (m.containsKey(name)) {
            throw new BadQuery("duplicate key `" + name + "`");
          }
          m.put(name, v);
        }
        if (k != JsonToken.END_OBJECT) {
          throw new BadQuery("malformed JSON object");
        }
        return m;
      }
      case START_ARRAY -> {
        List<Object> l = new ArrayList<>();
        JsonToken v;
        while ((v = p.nextToken()) != JsonToken.END_ARRAY) {
          if (v == null) {
            throw new BadQuery("unterminated JSON array");
          }
          l.add(read(p, v));
        }
        return l;
      }
      case VALUE_STRING -> {
        return p.getText();
      }
      case VALUE_NUMBER_INT -> {
        BigInteger big = p.getBigIntegerValue();
        if (big.bitLength() > 63) {
          throw new BadQuery("integer out of range: " + big);
        }
        return big.longValue();
      }
      case VALUE_NUMBER_FLOAT -> {
        return p.getDoubleValue();
      }
      case VALUE_TRUE -> {
        return Boolean.TRUE;
      }
      case VALUE_FALSE -> {
        return Boolean.FALSE;
      }
      case VALUE_NULL -> {
        return NULL;
      }
      default -> throw new BadQuery("unexpected JSON token " + t);
    }
  }

  private static String firstLine(String s) {
    if (s == null) {
      return "unknown error";
    }
    int nl = s.indexOf('\n');
    return (nl < 0 ? s : s.substring(0, nl)).strip();
  }
}

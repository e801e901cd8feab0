package org.tierdex.bench.lucene;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.lucene.util.Version;

/**
 * Lucene peer engine of the tierdex benchmark: implements the engine protocol of
 * {@code bench/PROTOCOL.md} ({@code version}, {@code index}, {@code query}).
 */
public final class Main {
  private Main() {}

  /** A command-line or input error: message for stderr, non-zero exit. */
  static final class UsageException extends Exception {
    private static final long serialVersionUID = 1L;

    UsageException(String message) {
      super(message);
    }
  }

  static final String USAGE =
      """
      usage:
        ENGINE version
        ENGINE index --corpus FILE --index DIR [--threads N] [--memory-mb M] [--bp]
        ENGINE query --index DIR [--threads N]
      """;

  public static void main(String[] args) {
    int code;
    try {
      code = run(args);
    } catch (UsageException e) {
      System.err.println("error: " + e.getMessage());
      code = 2;
    } catch (java.io.IOException e) {
      // e.g. the corpus or index cannot be read, or stdout was closed (broken pipe)
      System.err.println("error: " + e);
      code = 1;
    } catch (Throwable t) {
      System.err.println("error: " + t);
      t.printStackTrace(System.err);
      code = 1;
    }
    System.out.flush();
    System.err.flush();
    System.exit(code);
  }

  private static int run(String[] args) throws Exception {
    if (args.length == 0) {
      throw new UsageException("missing command\n" + USAGE);
    }
    String cmd = args[0];
    switch (cmd) {
      case "version" -> {
        parseOptions(args, Set.of(), Set.of());
        System.out.println(versionLine());
        return 0;
      }
      case "index" -> {
        Map<String, String> o =
            parseOptions(args, Set.of("corpus", "index", "threads", "memory-mb"), Set.of("bp"));
        String corpus = required(o, "corpus");
        String index = required(o, "index");
        int threads = intOption(o, "threads", 2, 1, 1024);
        int memoryMb = intOption(o, "memory-mb", 1024, 1, 1 << 20);
        // --bp: documents of the final segment reordered by recursive graph bisection.
        boolean bp = o.containsKey("bp");
        return Indexer.run(corpus, index, threads, memoryMb, bp);
      }
      case "query" -> {
        Map<String, String> o = parseOptions(args, Set.of("index", "threads"), Set.of());
        String index = required(o, "index");
        int threads = intOption(o, "threads", 1, 1, 1024);
        return Searcher.run(index, threads);
      }
      case "-h", "--help", "help" -> {
        System.out.print(USAGE);
        return 0;
      }
      default -> throw new UsageException("unknown command '" + cmd + "'\n" + USAGE);
    }
  }

  /** {@code lucene 10.6.0 (JDK 25.0.3)}. */
  static String versionLine() {
    Runtime.Version v = Runtime.version();
    String jdk = v.feature() + "." + v.interim() + "." + v.update();
    return "lucene " + Version.LATEST + " (JDK " + jdk + ")";
  }

  /**
   * Parses {@code --name value} and {@code --name=value} after the command word; a flag of {@code
   * flags} takes no value ({@code --bp}) and maps to the empty string.
   */
  private static Map<String, String> parseOptions(
      String[] args, Set<String> known, Set<String> flags) throws UsageException {
    Map<String, String> out = new HashMap<>();
    for (int i = 1; i < args.length; i++) {
      String a = args[i];
      if (!a.startsWith("--") || a.length() == 2) {
        throw new UsageException("unexpected argument '" + a + "'\n" + USAGE);
      }
      int eq = a.indexOf('=');
      String name = eq >= 0 ? a.substring(2, eq) : a.substring(2);
      String value;
      if (flags.contains(name)) {
        if (eq >= 0) {
          throw new UsageException("option --" + name + " takes no value");
        }
        value = "";
      } else if (eq >= 0) {
        value = a.substring(eq + 1);
      } else {
        if (i + 1 >= args.length) {
          throw new UsageException("option --" + name + " needs a value");
        }
        value = args[++i];
      }
      if (!known.contains(name) && !flags.contains(name)) {
        throw new UsageException("unknown option --" + name + "\n" + USAGE);
      }
      if (out.put(name, value) != null) {
        throw new UsageException("option --" + name + " given twice");
      }
    }
    return out;
  }

  private static String required(Map<String, String> o, String name) throws UsageException {
    String v = o.get(name);
    if (v == null || v.isEmpty()) {
      throw new UsageException("missing --" + name + "\n" + USAGE);
    }
    return v;
  }

  private static int intOption(Map<String, String> o, String name, int dflt, int min, int max)
      throws UsageException {
    String v = o.get(name);
    if (v == null) {
      return dflt;
    }
    int n;
    try {
      n = Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new UsageException("--" + name + " must be an integer, got '" + v + "'");
    }
    if (n < min || n > max) {
      throw new UsageException("--" + name + " must be in " + min + ".." + max + ", got " + n);
    }
    return n;
  }
}

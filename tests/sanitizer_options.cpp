// The sanitizer settings of every test and fuzz binary, compiled into the binary itself so
// that a sanitized build (`make sanitize`, `make fuzz`) behaves the same run by ctest, by
// hand or under a debugger, with no environment to remember. The runtimes call these
// hooks at start-up; in a build without sanitizers they are unused functions.
//
// ASan: the first report stops the program (halt_on_error); leaks are reported at exit; a
// failed allocation returns null as malloc does (allocator_may_return_null), which Kiln's
// allocator turns into its out-of-memory kiln::Error: the hostile-size tests ask for 2^62
// bytes on purpose, which ASan would otherwise treat as a fatal error.
// LSan: LLVM's OpenMP runtime keeps per-thread team data it allocates when a parallel
// region first runs with a new thread count and never frees it (reported from inside
// libomp.so itself, no Kiln frame); OpenSSL, under libcurl in the download tests, now and
// then has a per-thread block of its own still live when LSan looks at exit (reported
// from CRYPTO_zalloc inside libcrypto.so, no Kiln frame): both suppressed by library,
// nothing else is.
// UBSan: every report is fatal (the build also passes -fno-sanitize-recover) with a stack.
// Values in ASAN_OPTIONS / UBSAN_OPTIONS still override these.

extern "C" const char* __asan_default_options() {
  return "halt_on_error=1:detect_leaks=1:strict_string_checks=1:allocator_may_return_null=1";
}

extern "C" const char* __lsan_default_suppressions() { return "leak:libomp.so\nleak:libcrypto.so\n"; }

extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

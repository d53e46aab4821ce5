"""What happened, in the words the mechanism itself uses: the alternatives the signs in
``signs.py`` are built from, grouped by mechanism rather than by tool (issue 44).

A table tuned on the logs it was shown stops at the edge of those logs; a mechanism does
not. Each group below names one thing that happened to a program and the words its
layer prints for it, taken from that layer's documentation or source:

* an HTTP response's status, as a client reports it (``HTTP_SAID``): curl's
  CURLE_HTTP_RETURNED_ERROR ("The requested URL returned error: 503", and git over http,
  which uses it), git's "RPC failed; HTTP 503", Maven Resolver's "status code: 500,
  reason phrase: ..." and Wagon's "Return code is: 401", Gradle's "Received status code
  503 from server", Java's "Server returned HTTP response code: 503", Python's urllib
  "HTTP Error 503:" and requests' "503 Server Error:", wget's "ERROR 503:", .NET's
  "Response status code does not indicate success: 503", axios' "Request failed with
  status code 503", docker's "unexpected HTTP status: 503", cargo's "got 503". The
  family decides the class: 5xx the service's (``outage``), 429 a rate limit, 401/403/407
  credentials refused. A 404 decides nothing: a stale URL in the project and a cache
  probe that misses look the same (a CI cache's curl 404 sits in many code failures).
* a runtime's own report that it ran out of memory (``RUNTIME_OUT_OF_MEMORY``): V8's
  "Reached heap limit" / "JavaScript heap out of memory", the JVM's
  ``java.lang.OutOfMemoryError`` and "There is insufficient memory for the Java Runtime
  Environment", Go's "fatal error: runtime: out of memory", Rust's "memory allocation of
  N bytes failed", .NET's ``System.OutOfMemoryException``, C++'s ``std::bad_alloc``,
  GHC's "out of memory (requested N bytes)", Ruby's ``NoMemoryError``.
* a time limit that is the job's, not a test's (``JOB_TIME_LIMITS``): the CI's own kill
  (Jenkins' build-timeout plugin "Build timed out (after N minutes)", its timeout step
  "Cancelling nested steps due to timeout" / "Timeout has been exceeded", GitLab's
  "execution took longer than", Azure's "ran longer than the maximum time", GitHub's
  "exceeded the maximum execution time", Travis' "No output has been received in the
  last", CircleCI's "Too long with no output", "Exceeded timeout of N minutes"), and a
  test runner's limit on the whole run (go test's "panic: test timed out after 10m0s").
  A single test's own timeout in milliseconds (jest's "Exceeded timeout of 5000 ms for a
  test", mocha's "Timeout of 2000ms exceeded") is a hanging test: the code's.
* a toolchain the machine lacks (``MISSING_TOOLCHAIN``): autoconf's "C compiler cannot
  create executables" / "no acceptable C compiler found in $PATH", CMake's "No
  CMAKE_C_COMPILER could be found", spack's "No compilers found for operating system",
  rustc's "linker `cc` not found", the tool cache's "Unable to find Node version 'x' for
  platform linux and architecture x64" (setup-node, setup-go and their kin),
  setup-python's "Version 3.6 with arch x64 not found", rustup's "toolchain 'x' is not
  installed", pyenv's "version `x' is not installed", macOS's "xcrun: error: invalid
  active developer path", the JVM launchers' "JAVA_HOME is not set"; and a language runtime's own
  development headers (``Python.h``, ``ruby.h``, Perl's ``EXTERN.h``, the JDK's
  ``jni.h``): a C extension that includes them is right by construction, so their
  absence is the machine's (a project's own missing header stays the code's).
* a binary the machine cannot execute (``EXEC_FORMAT``): ENOEXEC "Exec format error",
  bash's "cannot execute binary file", Windows' ERROR_BAD_EXE_FORMAT (193, "is not a
  valid Win32 application"), Wine's "Bad EXE format".
* a rootless container runtime without subordinate ids (``USER_NAMESPACE``): the
  containers/storage and shadow-utils words podman's and buildah's troubleshooting pages
  quote ("insufficient UIDs or GIDs available in user namespace", "no subuid ranges
  found for user").
* a registry refusing access (``ACCESS_REFUSED``): the OCI distribution spec's DENIED
  ("requested access to the resource is denied") and UNAUTHORIZED ("authentication
  required"), GitHub's "Permission to o/r.git denied to u", GitLab's "HTTP Basic: Access
  denied", npm's ``E401``/``E403``.
* a tool saying the network failed it (``NETWORK_SAID``): cargo's "spurious network
  error" (it retries only those), libgit2's error class ``class=Net (12)``, Node's
  "socket hang up", ECONNABORTED's "Connection aborted", http.client's
  ``RemoteDisconnected``, OpenSSL's ``SSL_ERROR_SYSCALL``, Go's "i/o timeout" (and, in
  ``signs``, Java's "Connection reset", apt's "Temporary failure resolving", musl's "Name
  does not resolve").
* a container engine the machine lacks (``CONTAINER_ENGINE``): the Docker client's
  "Cannot connect to the Docker daemon at unix:///var/run/docker.sock" and "permission
  denied while trying to connect to the Docker daemon socket".

Strings only (each one alternative of a sign's pattern, compiled case-insensitively
unless it says otherwise): ``signs.py`` composes them, and ``literals.needed`` finds the
words each needs for the gates.
"""

from __future__ import annotations

from typing import Final

# The phrases of RFC 9110 that follow a status a client prints, by family.
_REASONS_5XX: Final = (
    r"(?:Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable"
    r"|Gateway Time-?out|HTTP Version Not Supported|Server Error)"
)


def said_number(code: str) -> tuple[str, ...]:
    """A status said to be one, in the plainest words ("status: 429", "HTTP 401",
    "error code 503"), each spelt out so that its gate word holds the number. Not "error
    500" alone: an application's own log says that of the page it rendered."""
    return tuple(
        rf"\b{words}{separator}{code}\b"
        for words in ("status", "status code", "HTTP", "HTTP code", "HTTP status", "error code")
        for separator in (" ", ":", ": ", "=")
    )


def http_said(codes: str) -> tuple[str, ...]:
    """The ways a client reports that a response had one of ``codes`` (a regex of
    three-digit statuses): never a bare number ("pkg.whl (429 kB)" is a size, "got 503"
    in an assertion's message is the test's)."""
    return (
        rf"\bThe requested URL returned error:? {codes}\b",  # curl, git over http
        rf"\bRPC failed; HTTP {codes}\b",  # git
        rf"\bstatus code:? {codes}, reason phrase\b",  # Maven Resolver
        rf"\bReturn code is:? {codes}\b",  # Maven Wagon
        rf"\bReceived status code {codes} from server\b",  # Gradle
        rf"\b(?:Server returned )?HTTP response code:? {codes}\b",  # Java, Gradle
        rf"\bHTTP Error {codes}:",  # Python's urllib
        rf"\b{codes} (?:Server|Client) Error: .* for url\b",  # requests
        rf"(?-i:\bERROR {codes}: )",  # wget
        rf"\bdoes not indicate success: {codes}\b",  # .NET HttpClient
        rf"\bfailed with status code {codes}\b",  # axios, the GitHub toolkit
        rf"\bunexpected (?:HTTP )?status(?: code)?:? {codes}\b",  # docker, go
        rf"\bHTTP error {codes} while getting\b",  # pip
        rf"\bfailed to get successful HTTP response from .*\bgot {codes}\b",  # cargo
        rf"^npm ERR! code E{codes}\b",
        rf"^npm error code E{codes}\b",
        rf"^npm ERR! {codes} ",
        rf"^npm error {codes} ",
        rf"\bCondaHTTPError: HTTP {codes}\b",
    )


SERVER_ERROR: Final = r"5\d\d"
RATE_LIMIT: Final = r"429"
AUTH_REFUSED: Final = r"(?:401|403|407)"

HTTP_5XX: Final = (
    *http_said(SERVER_ERROR),
    *said_number(SERVER_ERROR),
    rf"\btoo many {SERVER_ERROR} error responses\b",  # urllib3's Retry
    # apt's and Go's: the URL, then the status with its phrase ("Err:1 http://... 503
    # Service Unavailable", "reading https://proxy.golang.org/...: 503 Service
    # Unavailable"): the phrase says it is a status.
    rf"://\S+:?\s+{SERVER_ERROR} {_REASONS_5XX}\b",
)

ACCESS_REFUSED: Final = (
    *http_said(AUTH_REFUSED),
    *said_number(AUTH_REFUSED),
    r"\brequested access to the resource is denied\b",  # OCI distribution: DENIED
    r"^unauthorized: authentication required\b",  # OCI distribution: UNAUTHORIZED
    r"\bPermission to \S+ denied to\b",  # GitHub, on a push
    r"\bHTTP Basic: Access denied\b",  # GitLab
)

RUNTIME_OUT_OF_MEMORY: Final = (
    r"\bJavaScript heap out of memory\b",  # V8, with "Reached heap limit"
    r"\bReached heap limit\b",
    r"\bAllocation failed - process out of memory\b",  # older V8
    r"(?-i:\bjava\.lang\.OutOfMemoryError\b)",
    r"\binsufficient memory for the Java Runtime Environment\b",
    r"^fatal error: runtime: out of memory\b",  # Go
    r"\bruntime: out of memory: cannot allocate\b",
    r"\bmemory allocation of \d+ bytes failed\b",  # Rust's alloc error handler
    r"(?-i:\bSystem\.OutOfMemoryException\b)",
    r"(?-i:\bstd::bad_alloc\b)",
    r"\bout of memory \(requested \d+ bytes\)",  # GHC's RTS
    r"(?-i:\bNoMemoryError\b)",  # Ruby
)

# A duration as CI systems and test runners print one: "120 minutes", "1800 seconds",
# Go's "10m0s" and "1h0m0s".
_DURATION: Final = (
    r"\d+(?:\.\d+)?\s?(?:s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)"
    r"(?:\d+(?:\.\d+)?(?:s|m|h))*\b"
)
# The job's, in minutes or hours: a test's own limit is in (milli)seconds.
_JOB_DURATION: Final = r"\d+\s?(?:m|min|mins|minutes?|h|hours?)\b"

JOB_TIME_LIMITS: Final = (
    # go test's panic, nix, mozharness (a connection's own timeout is the network's)
    rf"(?<!connection )(?<!connect )\btimed out after {_DURATION}",
    rf"\bBuild timed out \(after {_JOB_DURATION}",  # Jenkins build-timeout
    r"\bCancelling nested steps due to timeout\b",  # Jenkins timeout step
    r"\bTimeout has been exceeded\b",
    rf"\bexceeded (?:the )?time ?out of {_JOB_DURATION}",
    r"\bexecution took longer than \d",  # GitLab runner
    r"\bran longer than the maximum time of\b",  # Azure Pipelines
    r"\bexceeded the maximum (?:time|execution time)\b",  # GitHub Actions, Travis
    r"\bno output has been received in the last \d+",  # Travis
    r"\btoo long with no output\b",  # CircleCI
    r"\bThe action has timed out\b",  # GitHub Actions, timeout-minutes of a step
)

MISSING_TOOLCHAIN: Final = (
    r"\bC\+?\+? compiler cannot create executables\b",  # autoconf
    r"\bno acceptable (?:C|C\+\+|Fortran) compilers? found\b",  # autoconf, node's configure
    r"\bno suitable (?:C |C\+\+ |Fortran )?compilers? (?:was |were )?found\b",
    r"\bno usable (?:C |C\+\+ |Fortran )?compilers? (?:was |were )?found\b",
    r"\bno compilers? (?:found|available)\b",  # spack
    r"\bNo CMAKE_(?:C|CXX|Fortran|CUDA)_COMPILER could be found\b",
    r"\bCMAKE_(?:C|CXX|Fortran)_COMPILER not set\b",
    r"\blinker `[^`]+` not found\b",  # rustc
    r"\bUnable to find \S+ version '[^']*' for platform \S+ and architecture\b",
    r"\bversion '?[\w.+-]+'? with arch(?:itecture)? '?[\w-]+'? (?:was )?not found\b",
    r"\bMicrosoft Visual C\+\+ [\d.]+ or greater is required\b",  # pip on Windows
    r"\bxcrun: error: invalid active developer path\b",  # macOS without its tools
    r"\bJAVA_HOME is (?:not set|set to an invalid directory)\b",  # gradlew, mvnw
    r"\bUnable to locate a Java Runtime\b",  # macOS's java stub
    r"\btoolchain '[^']+' is not installed\b",  # rustup
    r"\bpyenv: version [`'][^`']+' is not installed\b",
    # a language runtime's own development headers
    r"\bfatal error: (?:Python|pyconfig|ruby|EXTERN|jni)\.h: No such file or directory",
)

EXEC_FORMAT: Final = (
    r"\bexec format error\b",
    r"\bENOEXEC\b",
    r"\bcannot execute binary file\b",
    r"\bis not a valid Win32 application\b",
    r"\bBad EXE format\b",
)

USER_NAMESPACE: Final = (
    r"\binsufficient UIDs or GIDs available in user namespace\b",
    r"\bno sub[ug]id ranges found for user\b",
    r"\bFound no [UG]ID ranges set aside for user\b",
)

NETWORK_SAID: Final = (
    r"\bspurious network error\b",  # cargo: it retries only network errors
    r"(?-i:\bclass=Net \(12\))",  # libgit2's GIT_ERROR_NET
    r"\bsocket hang up\b",  # Node's words for a connection closed under a request
    r"\bConnection aborted\b",  # ECONNABORTED's words (urllib3, requests)
    r"\bECONNABORTED\b",
    r"(?-i:\bRemoteDisconnected\b)",  # http.client: closed without a response
    r"\bSSL_ERROR_SYSCALL\b",  # OpenSSL: the connection broke under TLS
    r"\bi/o timeout\b",  # Go's net: a dial or read that timed out
)

# A container engine the machine does not run, or does not let this user reach.
CONTAINER_ENGINE: Final = (
    r"\bCannot connect to the Docker daemon at\b",
    r"\bpermission denied while trying to connect to the Docker daemon socket\b",
)

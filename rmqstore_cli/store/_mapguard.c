/* The SIGBUS guard of mapped reads (rmqstore_cli/store/mapguard.py; issue 31).
 *
 * A store file that is truncated while rmqstore has it mapped (a store copied while a
 * broker or expire still runs, an rsync in flight) turns every read of a page past its new
 * end into a SIGBUS, which kills the process with no message. Here:
 *
 * - register(mapping, file_id, writable) records a mapping's address range (a fixed table,
 *   no allocation; found by the buffer protocol) and makes sure the handler is installed;
 *   unregister(token) forgets it. Both are called with the GIL held, so they never race
 *   each other; only the handler runs concurrently (any thread, at any moment).
 * - the handler (sigaction SA_SIGINFO) looks the faulting address up in the table. Inside
 *   a registered mapping it maps anonymous zero pages (MAP_FIXED, private) over the rest of
 *   that mapping from the faulting page, appends (file id, offset of that page) to a fault
 *   log, and returns: the read goes on and sees zeros, which every walk takes for the end of
 *   the data. Python reads the log at safe points (faults(), count()) and raises one error
 *   naming the file and offset. Any other SIGBUS gets the disposition that was there before
 *   this handler (the default: the process dies as it would have).
 *
 * Async-signal-safety: the handler touches only the static table and log (lock-free
 * atomics, C11), and calls mmap, sigaction and raise; sigaction and raise are
 * async-signal-safe by POSIX, mmap is a plain system call wrapper on Linux (glibc and musl
 * take no lock in it). errno is saved and restored. Threads: SIGBUS from a fault is
 * delivered to the faulting thread, which is the one the handler fixes up; the table is
 * process-wide, so any thread (a C loop running without the GIL) is covered. fork: the
 * child inherits the mappings, the table and the handler alike (pyspark's forked workers,
 * pipeline/daemon.py), and no lock can be left held.
 *
 * An optional extension (setup.py) of its own, apart from the speed paths (_ckernels.c):
 * it is a safety mechanism, active under RMQSTORE_PURE=1 too. Where it did not build,
 * mapguard.py reads read-only files into private memory instead (no SIGBUS possible).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* More slots than a process can have mappings (vm.max_map_count is 65530 by default); the
 * table is static (zero pages until used). A full table makes register() return None and
 * mapguard.py fall back to a private copy. */
#define SLOTS 65536
/* Faults kept with their file and offset: each fault zero-maps the rest of its mapping, so
 * a mapping faults a few times at most; past this, count() still counts. */
#define LOG_SIZE 4096

enum { FREE = 0, CLAIMED = 1, LIVE = 2 };

struct slot {
    atomic_int state;
    uintptr_t base;
    size_t len;
    long long id;
    int prot;
};

struct fault {
    atomic_int ready;
    long long id;
    long long offset;
};

static struct slot slots[SLOTS];
static atomic_size_t used;  /* slots [0, used) may be LIVE */
static struct fault faults_log[LOG_SIZE];
static atomic_ullong nfaults;
static struct sigaction previous;
static uintptr_t page_size;

#if ATOMIC_INT_LOCK_FREE != 2 || ATOMIC_LLONG_LOCK_FREE != 2 || ATOMIC_POINTER_LOCK_FREE != 2
#error "the SIGBUS guard needs lock-free atomics (its handler reads them)"
#endif

static void on_sigbus(int sig, siginfo_t *si, void *context);

/* Record a fault of file `id` at `offset` (async-signal-safe). */
static void record(long long id, long long offset)
{
    unsigned long long k = atomic_fetch_add(&nfaults, 1);
    if (k < LOG_SIZE) {
        faults_log[k].id = id;
        faults_log[k].offset = offset;
        atomic_store_explicit(&faults_log[k].ready, 1, memory_order_release);
    }
}

/* Zero-map the rest of the registered mapping holding `addr` from its page and record the
 * fault; 0 when no registered mapping holds it (or the remap failed). */
static int fix_up(uintptr_t addr)
{
    size_t n = atomic_load_explicit(&used, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        struct slot *s = &slots[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != LIVE)
            continue;
        if (addr < s->base || addr - s->base >= s->len)
            continue;
        uintptr_t from = addr & ~(page_size - 1);
        uintptr_t end = (s->base + s->len + page_size - 1) & ~(page_size - 1);
        void *got = mmap((void *)from, end - from, s->prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (got == MAP_FAILED)
            return 0;
        record(s->id, (long long)(from - s->base));
        return 1;
    }
    return 0;
}

static void on_sigbus(int sig, siginfo_t *si, void *context)
{
    (void)context;
    int saved = errno;
#ifdef BUS_ADRERR
    /* BUS_ADRERR: a page the file no longer has (truncated), or an I/O error reading it */
    if (si != NULL && si->si_code == BUS_ADRERR && fix_up((uintptr_t)si->si_addr)) {
        errno = saved;
        return;
    }
#endif
    /* Not ours: the disposition from before this handler. A fault re-executes the access and
     * faults again under it; a SIGBUS sent by kill() is raised again (blocked until return). */
    sigaction(SIGBUS, &previous, NULL);
    if (si == NULL || si->si_code <= 0)
        raise(sig);
    errno = saved;
}

/* Install the handler unless it is the current one (another handler installed since, such
 * as Python's faulthandler in a Spark worker, is kept as the one to hand other faults to). */
static int ensure_installed(void)
{
    struct sigaction cur, sa;
    if (sigaction(SIGBUS, NULL, &cur) != 0)
        return -1;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)
        return 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    previous = cur;
    return sigaction(SIGBUS, &sa, NULL);
}

/* Forget every LIVE slot overlapping [base, base + len): the kernel handed those addresses
 * to a new mapping, so whatever was registered there was unmapped without unregister(). */
static void drop_overlapping(uintptr_t base, size_t len)
{
    size_t n = atomic_load_explicit(&used, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        struct slot *s = &slots[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) == LIVE && s->base < base + len
            && base < s->base + s->len)
            atomic_store_explicit(&s->state, FREE, memory_order_release);
    }
}

PyDoc_STRVAR(register_doc,
"register(mapping, file_id, writable) -> (slot, address) or None\n\n"
"Guard the mapping's address range (an mmap, found by the buffer protocol): a SIGBUS inside\n"
"it zero-maps the rest of it and is logged under file_id. None when the table is full.");

static PyObject *g_register(PyObject *self, PyObject *args)
{
    PyObject *obj;
    long long id;
    int writable;
    Py_buffer v;
    (void)self;
    if (!PyArg_ParseTuple(args, "OLp", &obj, &id, &writable))
        return NULL;
    if (PyObject_GetBuffer(obj, &v, PyBUF_SIMPLE) != 0)
        return NULL;
    uintptr_t base = (uintptr_t)v.buf;
    size_t len = (size_t)v.len;
    PyBuffer_Release(&v);
    if (len == 0) {
        PyErr_SetString(PyExc_ValueError, "an empty mapping cannot be guarded");
        return NULL;
    }
    if (ensure_installed() != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    drop_overlapping(base, len);
    for (size_t i = 0; i < SLOTS; i++) {
        int expected = FREE;
        if (!atomic_compare_exchange_strong(&slots[i].state, &expected, CLAIMED))
            continue;
        slots[i].base = base;
        slots[i].len = len;
        slots[i].id = id;
        slots[i].prot = PROT_READ | (writable ? PROT_WRITE : 0);
        size_t n = atomic_load(&used);
        while (n < i + 1 && !atomic_compare_exchange_weak(&used, &n, i + 1))
            ;
        atomic_store_explicit(&slots[i].state, LIVE, memory_order_release);
        return Py_BuildValue("(nK)", (Py_ssize_t)i, (unsigned long long)base);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(unregister_doc,
"unregister(token) -> None\n\n"
"Forget a mapping registered under token (register's result), before it is unmapped.");

static PyObject *g_unregister(PyObject *self, PyObject *args)
{
    Py_ssize_t i;
    unsigned long long base;
    (void)self;
    if (!PyArg_ParseTuple(args, "(nK)", &i, &base))
        return NULL;
    if (i < 0 || i >= SLOTS) {
        PyErr_SetString(PyExc_ValueError, "not a guard token");
        return NULL;
    }
    struct slot *s = &slots[i];
    if (atomic_load(&s->state) == LIVE && s->base == (uintptr_t)base)
        atomic_store_explicit(&s->state, FREE, memory_order_release);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(count_doc, "count() -> int\n\nFaults caught so far in this process (never reset).");

static PyObject *g_count(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong(atomic_load(&nfaults));
}

PyDoc_STRVAR(faults_doc,
"faults(start) -> list of (file_id, offset)\n\n"
"The logged faults from number start on (as far as they are complete, at most the log's size).");

static PyObject *g_faults(PyObject *self, PyObject *args)
{
    unsigned long long start;
    (void)self;
    if (!PyArg_ParseTuple(args, "K", &start))
        return NULL;
    unsigned long long n = atomic_load(&nfaults);
    if (n > LOG_SIZE)
        n = LOG_SIZE;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (unsigned long long k = start; k < n; k++) {
        if (!atomic_load_explicit(&faults_log[k].ready, memory_order_acquire))
            break;  /* another thread's handler is writing it */
        PyObject *t = Py_BuildValue("(LL)", faults_log[k].id, faults_log[k].offset);
        if (t == NULL || PyList_Append(out, t) != 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"register", g_register, METH_VARARGS, register_doc},
    {"unregister", g_unregister, METH_VARARGS, unregister_doc},
    {"count", g_count, METH_NOARGS, count_doc},
    {"faults", g_faults, METH_VARARGS, faults_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqstore_cli.store._mapguard",
    "The SIGBUS guard of mapped reads (see rmqstore_cli/store/mapguard.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__mapguard(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    page_size = ps > 0 ? (uintptr_t)ps : 4096;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "LOG_SIZE", LOG_SIZE) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

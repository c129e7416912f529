/*
 * logwrites: read the log of the kernel's dm-log-writes target, which
 * records every write a device received, in the order the device made
 * them durable, with its flushes and the marks a test sets
 * (Documentation/admin-guide/device-mapper/log-writes.rst).  A test
 * replays the log onto a copy of the device as it was when the log began,
 * up to a chosen entry: the disk after a power cut that kept exactly the
 * writes logged before that entry and lost the drive's cache.
 *
 *   logwrites list LOG
 *       "entries <N> sectorsize <S>", then one line per entry:
 *       "<index> <sector> <sectors> <flags> [<mark>]", index from 1,
 *       sector and sectors in units of S, flags FLUSH, FUA, DISCARD,
 *       MARK, METADATA joined by '|' (or "-"), the mark's text last.
 *   logwrites replay LOG DEVICE FROM TO
 *       write entries FROM..TO (from 1, both included; TO = FROM - 1 is
 *       none) onto DEVICE, a file or a block device, then fsync it.  A
 *       discard writes zeros: what the range holds after one is not
 *       defined, and zeros are what a drive most often answers.
 *
 * The log: at byte 0 a super block (le64 magic 0x6a736677736872, le64
 * version 1, le64 entries, le32 sectorsize), from byte S on the entries,
 * each one sector of S bytes (le64 sector, le64 sectors, le64 flags, le64
 * data_len, then data_len bytes of the mark's text for a mark) followed
 * by its sectors of data (none for a discard, a flush without data or a
 * mark).  The super counts the entries when the target goes, so the log
 * is read after `dmsetup remove`.
 *
 * Exit status: 0 done, 1 the log or the device is not usable (why on
 * stderr), 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <endian.h>
#include <linux/fs.h>

#define LOG_MAGIC 0x6a736677736872ULL
#define LOG_VERSION 1
#define ENTRY_HEAD 32

enum {
	F_FLUSH = 1 << 0,
	F_FUA = 1 << 1,
	F_DISCARD = 1 << 2,
	F_MARK = 1 << 3,
	F_METADATA = 1 << 4,
};

static const struct {
	uint64_t bit;
	const char *name;
} flag_names[] = {
	{ F_FLUSH, "FLUSH" }, { F_FUA, "FUA" }, { F_DISCARD, "DISCARD" },
	{ F_MARK, "MARK" }, { F_METADATA, "METADATA" },
};

struct log {
	int fd;
	const char *path;
	uint64_t entries;
	uint32_t sectorsize;
	off_t next;          /* offset of the next entry's header */
	unsigned char *head; /* one sector */
};

struct entry {
	uint64_t index, sector, sectors, flags, data_len;
	off_t data;          /* offset of its data in the log */
	char mark[512];
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "logwrites: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static uint64_t le64_at(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t le32_at(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

/* Exactly @len bytes at @off; 0, or 1 with the reason on stderr. */
static int read_at(int fd, const char *path, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail("%s: read at %jd: %s", path, (intmax_t)(off + (off_t)done),
				    strerror(errno));
		if (n == 0)
			return fail("%s: ends at %jd, %zu bytes short of what the log says",
				    path, (intmax_t)(off + (off_t)done), len - done);
		done += (size_t)n;
	}
	return 0;
}

static int write_at(int fd, const char *path, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return fail("%s: write at %jd: %s", path, (intmax_t)(off + (off_t)done),
				    n < 0 ? strerror(errno) : "wrote nothing");
		done += (size_t)n;
	}
	return 0;
}

static int log_open(struct log *lg, const char *path)
{
	unsigned char super[28];

	memset(lg, 0, sizeof(*lg));
	lg->path = path;
	lg->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (lg->fd < 0)
		return fail("%s: %s", path, strerror(errno));
	if (read_at(lg->fd, path, super, sizeof(super), 0))
		return 1;
	if (le64_at(super) != LOG_MAGIC)
		return fail("%s: not a dm-log-writes log (magic %#" PRIx64 ")", path,
			    le64_at(super));
	if (le64_at(super + 8) != LOG_VERSION)
		return fail("%s: log version %" PRIu64 ", this reads %d", path,
			    le64_at(super + 8), LOG_VERSION);
	lg->entries = le64_at(super + 16);
	lg->sectorsize = le32_at(super + 24);
	if (lg->sectorsize < 512 || lg->sectorsize > 65536 ||
	    (lg->sectorsize & (lg->sectorsize - 1)))
		return fail("%s: sector size %" PRIu32 " is not one", path, lg->sectorsize);
	lg->head = malloc(lg->sectorsize);
	if (!lg->head)
		return fail("out of memory");
	lg->next = lg->sectorsize;
	return 0;
}

/* The entry after the last one read, into @e; 0, or 1. */
static int log_next(struct log *lg, struct entry *e)
{
	uint64_t index = e->index + 1;

	if (index > lg->entries)
		return fail("%s: no entry %" PRIu64 ": the log has %" PRIu64, lg->path,
			    index, lg->entries);
	if (read_at(lg->fd, lg->path, lg->head, lg->sectorsize, lg->next))
		return 1;
	memset(e, 0, sizeof(*e));
	e->index = index;
	e->sector = le64_at(lg->head);
	e->sectors = le64_at(lg->head + 8);
	e->flags = le64_at(lg->head + 16);
	e->data_len = le64_at(lg->head + 24);
	e->data = lg->next + lg->sectorsize;
	if (e->flags & F_MARK) {
		if (e->data_len > lg->sectorsize - ENTRY_HEAD || e->data_len >= sizeof(e->mark))
			return fail("%s: entry %" PRIu64 ": a mark of %" PRIu64 " bytes",
				    lg->path, index, e->data_len);
		for (uint64_t i = 0; i < e->data_len; i++) {
			unsigned char c = lg->head[ENTRY_HEAD + i];

			e->mark[i] = c > ' ' && c < 127 ? (char)c : '?';
		}
	} else if (e->data_len) {
		/* the target logs data of its own only with marks */
		return fail("%s: entry %" PRIu64 ": %" PRIu64 " bytes of inline data, "
			    "which this does not read", lg->path, index, e->data_len);
	}
	if (e->sectors > (uint64_t)INT64_MAX / lg->sectorsize / 2)
		return fail("%s: entry %" PRIu64 ": %" PRIu64 " sectors", lg->path, index,
			    e->sectors);
	lg->next = e->data;
	if (!(e->flags & F_DISCARD))
		lg->next += (off_t)(e->sectors * lg->sectorsize);
	return 0;
}

static int cmd_list(const char *path)
{
	struct log lg;
	struct entry e = { 0 };

	if (log_open(&lg, path))
		return 1;
	if (lg.entries == 0)
		return fail("%s: the log has no entry", path);
	printf("entries %" PRIu64 " sectorsize %" PRIu32 "\n", lg.entries, lg.sectorsize);
	while (e.index < lg.entries) {
		char flags[64] = "";

		if (log_next(&lg, &e))
			return 1;
		for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++) {
			if (!(e.flags & flag_names[i].bit))
				continue;
			if (flags[0])
				strcat(flags, "|");
			strcat(flags, flag_names[i].name);
		}
		printf("%" PRIu64 " %" PRIu64 " %" PRIu64 " %s%s%s\n", e.index, e.sector,
		       e.sectors, flags[0] ? flags : "-", e.mark[0] ? " " : "", e.mark);
	}
	return fflush(stdout) ? fail("stdout: %s", strerror(errno)) : 0;
}

/* The size of @fd in bytes (a block device's too); -1 on failure. */
static off_t device_size(int fd, const char *path)
{
	struct stat st;
	uint64_t bytes;

	if (fstat(fd, &st) < 0) {
		fail("%s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISREG(st.st_mode))
		return st.st_size;
	if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &bytes) == 0)
		return (off_t)bytes;
	fail("%s: neither a file nor a block device whose size can be read", path);
	return -1;
}

static int replay_one(struct log *lg, const struct entry *e, int dev, const char *dpath,
		      off_t dsize, unsigned char *buf, size_t bufsize)
{
	uint64_t len = e->sectors * lg->sectorsize, done = 0;
	off_t to = (off_t)(e->sector * lg->sectorsize);

	if (e->sector > (uint64_t)dsize / lg->sectorsize ||
	    e->sectors > (uint64_t)dsize / lg->sectorsize - e->sector)
		return fail("entry %" PRIu64 ": sectors %" PRIu64 "+%" PRIu64 " are past the "
			    "end of %s (%jd bytes)", e->index, e->sector, e->sectors, dpath,
			    (intmax_t)dsize);
	if (e->flags & F_DISCARD)
		memset(buf, 0, bufsize);
	while (done < len) {
		size_t n = len - done < bufsize ? (size_t)(len - done) : bufsize;

		if (!(e->flags & F_DISCARD) &&
		    read_at(lg->fd, lg->path, buf, n, e->data + (off_t)done))
			return 1;
		if (write_at(dev, dpath, buf, n, to + (off_t)done))
			return 1;
		done += n;
	}
	return 0;
}

static int parse_index(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || end == s || *end || s[0] == '-';
}

static int cmd_replay(const char *path, const char *dpath, const char *from_s,
		      const char *to_s)
{
	static unsigned char buf[1 << 20];
	struct log lg;
	struct entry e = { 0 };
	uint64_t from, to;
	off_t dsize;
	int dev;

	if (parse_index(from_s, &from) || parse_index(to_s, &to) || from < 1 || to + 1 < from)
		return fail("replay: FROM and TO are entry numbers, 1 <= FROM <= TO + 1 "
			    "(got %s %s)", from_s, to_s) + 1;
	if (log_open(&lg, path))
		return 1;
	if (to > lg.entries)
		return fail("%s: no entry %" PRIu64 ": the log has %" PRIu64, path, to,
			    lg.entries);
	dev = open(dpath, O_WRONLY | O_CLOEXEC);
	if (dev < 0)
		return fail("%s: %s", dpath, strerror(errno));
	dsize = device_size(dev, dpath);
	if (dsize < 0)
		return 1;
	while (e.index < to) {
		if (log_next(&lg, &e))
			return 1;
		if (e.index >= from &&
		    replay_one(&lg, &e, dev, dpath, dsize, buf, sizeof(buf)))
			return 1;
	}
	if (fsync(dev) < 0 || close(dev) < 0)
		return fail("%s: %s", dpath, strerror(errno));
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: logwrites list LOG\n"
			"       logwrites replay LOG DEVICE FROM TO\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "list"))
		return cmd_list(argv[2]);
	if (argc == 6 && !strcmp(argv[1], "replay"))
		return cmd_replay(argv[2], argv[3], argv[4], argv[5]);
	return usage();
}

/*
 * xxh128 [FILE...]: print the XXH3-128 of each FILE as
 * "<32 lowercase hex>  <FILE>", like xxh128sum(1) of the xxhash package
 * (standard input when there is no FILE, or for "-", named "stdin"): the
 * hash in its canonical (big-endian) form, which is also how kvtierfs
 * shows it in user.kvtierfs.hash ("xxh3-128:<hex>").  The mount tests use it through
 * $KVT_XXH128, so that they need no xxhash command line tool.
 *
 * Exit status: 0 every FILE was hashed, 1 one could not be read (reported
 * on stderr), 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#define CHUNK (1u << 20)

/* Hashes @fd to its end into @hex; 0, or an errno. */
static int hash_fd(int fd, XXH3_state_t *st, char *buf, char hex[33])
{
	static const char digits[] = "0123456789abcdef";
	XXH128_canonical_t c;

	if (XXH3_128bits_reset(st) != XXH_OK)
		return EINVAL;
	for (;;) {
		ssize_t n = read(fd, buf, CHUNK);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			break;
		if (XXH3_128bits_update_dispatch(st, buf, (size_t)n) != XXH_OK)
			return EINVAL;
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	for (int i = 0; i < 16; i++) {
		hex[2 * i] = digits[c.digest[i] >> 4];
		hex[2 * i + 1] = digits[c.digest[i] & 15];
	}
	hex[32] = '\0';
	return 0;
}

int main(int argc, char **argv)
{
	static char *const stdin_only[] = { "-", NULL };
	char *const *files = argc > 1 ? argv + 1 : stdin_only;
	XXH3_state_t *st = XXH3_createState();
	char *buf = malloc(CHUNK);
	int status = 0;

	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-' && argv[i][1] != '\0') {
			fprintf(stderr, "usage: xxh128 [FILE...]\n");
			return 2;
		}
	}
	if (!st || !buf) {
		fprintf(stderr, "xxh128: out of memory\n");
		return 1;
	}
	for (; *files; files++) {
		const char *name = *files;
		bool is_stdin = strcmp(name, "-") == 0;
		int fd = is_stdin ? STDIN_FILENO : open(name, O_RDONLY | O_CLOEXEC);
		char hex[33];
		int err;

		if (fd < 0) {
			fprintf(stderr, "xxh128: %s: %s\n", name, strerror(errno));
			status = 1;
			continue;
		}
		err = hash_fd(fd, st, buf, hex);
		if (!is_stdin && close(fd) && !err)
			err = errno;
		if (err) {
			fprintf(stderr, "xxh128: %s: %s\n", name, strerror(err));
			status = 1;
			continue;
		}
		printf("%s  %s\n", hex, is_stdin ? "stdin" : name);
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "xxh128: standard output: %s\n", strerror(errno));
		status = 1;
	}
	free(buf);
	XXH3_freeState(st);
	return status;
}

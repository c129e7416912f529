/* listdir DIR: the raw directory entries of DIR (getdents64, so that an
 * entry with inode number 0, which readdir(3) would hide, is seen), read
 * whole first, the way ls and find read, then each checked against
 * lstat(2) of its name:
 *
 *     entries=N zero_ino=Z ino_mismatch=M stat_failed=F
 *
 * ("." and ".." not counted).  Exit 0 when Z, M and F are 0, 1 otherwise,
 * 2 on a usage or open error. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

struct entry {
	uint64_t ino;
	char *name;
};

int main(int argc, char **argv)
{
	static char buf[1 << 15];
	long entries = 0, zero = 0, mismatch = 0, failed = 0, cap = 0;
	struct entry *all = NULL;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: listdir DIR\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));

		if (n < 0) {
			perror("getdents64");
			return 2;
		}
		if (n == 0)
			break;
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);

			off += d->d_reclen;
			if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
				continue;
			if (entries == cap) {
				cap = cap ? 2 * cap : 1024;
				all = realloc(all, cap * sizeof(*all));
				if (!all)
					return 2;
			}
			all[entries].ino = d->d_ino;
			all[entries++].name = strdup(d->d_name);
		}
	}
	for (long i = 0; i < entries; i++) {
		struct stat st;

		if (all[i].ino == 0)
			zero++;
		if (fstatat(fd, all[i].name, &st, AT_SYMLINK_NOFOLLOW))
			failed++;
		else if (st.st_ino != all[i].ino)
			mismatch++;
		free(all[i].name);
	}
	free(all);
	close(fd);
	printf("entries=%ld zero_ino=%ld ino_mismatch=%ld stat_failed=%ld\n", entries, zero,
	       mismatch, failed);
	return zero || mismatch || failed;
}

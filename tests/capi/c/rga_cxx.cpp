// The C++ form of the im2d API (im2d.hpp): overloads with default arguments, as the
// rknpu2 C++ demos call them. Prints one "name status" line per call.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "im2d.hpp"

int main()
{
    std::vector<unsigned char> src_px(64 * 48 * 3), dst_px(32 * 24 * 3, 0);
    for (size_t i = 0; i < src_px.size(); i++) src_px[i] = (unsigned char)(i * 7 % 251);
    rga_buffer_t src = wrapbuffer_virtualaddr((void*)src_px.data(), 64, 48, RK_FORMAT_RGB_888);
    rga_buffer_t dst = wrapbuffer_virtualaddr((void*)dst_px.data(), 32, 24, RK_FORMAT_RGB_888, 32, 24);
    im_rect src_rect, dst_rect;
    memset(&src_rect, 0, sizeof src_rect);
    memset(&dst_rect, 0, sizeof dst_rect);
    printf("imcheck %d\n", (int)imcheck(src, dst, src_rect, dst_rect));
    printf("imresize %d\n", (int)imresize(src, dst));
    printf("pixel %d %d %d\n", dst_px[0], dst_px[1], dst_px[2]);
    int fd = memfd_create("cxx", 0);
    if (fd < 0 || ftruncate(fd, 32 * 24 * 3) != 0) return 1;
    rga_buffer_handle_t h = importbuffer_fd(fd, 32 * 24 * 3);
    rga_buffer_t by_handle = wrapbuffer_handle(h, 32, 24, RK_FORMAT_RGB_888);
    printf("imcopy %d\n", (int)imcopy(dst, by_handle));
    im_opt_t opt; // its version member has a default initialiser
    opt.color = 0x00ffffff;
    im_rect fill = {0, 0, 8, 8}, none = {0, 0, 0, 0};
    rga_buffer_t pat;
    memset(&pat, 0, sizeof pat);
    int fence = 0;
    int processed = (int)improcess(src, by_handle, pat, none, fill, none, -1, &fence, &opt, IM_COLOR_FILL);
    printf("improcess %d fence %d\n", processed, fence);
    unsigned char* m = (unsigned char*)mmap(NULL, 32 * 24 * 3, PROT_READ, MAP_SHARED, fd, 0);
    printf("filled %d copied %d\n", m[0] == 0xff && m[1] == 0xff && m[2] == 0xff,
           memcmp(m + 8 * 3, dst_px.data() + 8 * 3, 3) == 0);
    munmap(m, 32 * 24 * 3);
    printf("release %d\n", (int)releasebuffer_handle(h));
    printf("bad %s\n", imStrError(imresize(src, wrapbuffer_virtualaddr((void*)dst_px.data(), 2, 2, RK_FORMAT_RGB_565))));
    printf("version %d\n", (int)imcheckHeader());
    close(fd);
    return 0;
}

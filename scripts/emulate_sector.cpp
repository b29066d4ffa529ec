// CPU emulation of the index math of templates/transpose.cu.tera's RUNS=sector path (VEC=1),
// thread by thread: the checked loader, the READ=async loader of unchecked tiles (rows that
// start mid-word copied from the word before and kept shifted by one column in the tile, plus
// the extra word of a shifted row's last element) and the sector-aligned store phase, for
// f16/f32/f64, square/wide/tall tiles, TILE_DIM 16-64, BLOCK_ROWS 1-32, PAD 0-2, BOUNDS
// edge/always and TILES_PER_BLOCK 1/2, at odd and even shapes around the tile sizes. Checks:
// every tile element read was written by the same tile, no global access out of bounds, no
// shared write past a row or the tile, cp.async source and destination aligned, exact output.
// Why: READ=async was written in a session without a GPU (session 5). It mirrors the template
// by hand, so change it with the template.
// Usage: g++ -O2 -std=c++17 -o /tmp/emulate_sector scripts/emulate_sector.cpp && /tmp/emulate_sector
#include <cstdio>
#include <vector>
#include <string>
#include <algorithm>
typedef long long ll;
static char msg[256];
#define CHK(c, ...) do { if (!(c)) { snprintf(msg, sizeof msg, __VA_ARGS__); return false; } } while (0)
struct Cfg { int E, TD; int AS; int BR, PAD; bool always; int TPB; };
bool emulate(const Cfg& c, int rows, int cols) {
  int TW = c.AS == 1 ? 2*c.TD : c.TD, TH = c.AS == 2 ? 2*c.TD : c.TD;
  int E = c.E, BR = c.BR, SECTOR = 32/E, LEAD = SECTOR;
  int PAD_ELEMS = c.PAD * (E < 4 ? 4/E : 1), pitch = TW + PAD_ELEMS;
  int WE = E == 2 ? 2 : 1, RW = TW/WE, WR = BR*WE, OUT_ROWS = TW*BR/TH;
  ll N = (ll)rows*cols;
  auto shift = [&](int y) { return WE == 2 ? ((y & cols) & 1) : 0; };
  std::vector<ll> out(N, -1);
  int size = (TH+LEAD)*pitch;
  ll tiles_y = (rows+TH-1)/TH; int gx = (cols+TW-1)/TW; ll gy = std::min<ll>((tiles_y+c.TPB-1)/c.TPB, 65535);
  int nthr = TW*BR; ll tile_id = 0;
  std::vector<ll> tv(size), tt(size), wtid(size);
  for (ll by = 0; by < gy; ++by) for (int bx = 0; bx < gx; ++bx) {
    std::fill(tv.begin(), tv.end(), -1); std::fill(tt.begin(), tt.end(), -1);
    for (ll group = by; group*c.TPB < tiles_y; group += gy) for (int t = 0; t < c.TPB; ++t) {
      ll tr = group*c.TPB + t; if (c.TPB > 1 && tr >= tiles_y) break;
      int tc = bx; ++tile_id;
      bool checked = c.always || tc == gx-1 || tr == tiles_y-1 || tr == 0;
      int top = (int)tr*TH - LEAD;
      auto write = [&](int i, int col, ll v, int th) -> bool {
        CHK(col >= 0 && col < pitch, "smem write past row: row %d col %d pitch %d", i, col, pitch);
        CHK(i >= 0 && i < TH+LEAD, "smem write past tile row %d", i);
        int idx = i*pitch+col;
        if (tt[idx] == tile_id) CHK(tv[idx] == v, "conflicting smem write idx %d", idx);
        tv[idx] = v; tt[idx] = tile_id; return true;
      };
      for (int th = 0; th < nthr; ++th) {
        int ty = th / TW, tx = th % TW; int xs = tc*TW + tx;
        if (checked) {
          for (int j = 0; j < TH+LEAD; j += BR) {
            int i = ty + j, y = top + i;
            if (i > 0 && ((TH+LEAD) % BR == 0 || i < TH+LEAD) && y >= 0 && xs < cols && y < rows)
              if (!write(i, tx + shift(y), (ll)y*cols + xs, th)) return false;
          }
        } else {
          int tid = ty*TW + tx, q = tid % RW, r = tid / RW, p = shift(top + r);
          bool extra = p != 0 && q == RW-1;
          ll src = (ll)(top + r)*cols + (ll)tc*TW - p + q*WE;
          for (int j = 0; j < TH+LEAD; j += WR) {
            int i = r + j;
            if (i > 0 && ((TH+LEAD) % WR == 0 || i < TH+LEAD)) {
              CHK(shift(top+i) == p, "p not constant");
              for (int e = 0; e < 1 + extra; ++e) {
                ll s0 = e ? src + WE : src; int dc = e ? TW : q*WE;
                CHK(s0 >= 0 && s0 + WE <= N, "global OOB read %lld (N %lld) tile %lld,%d", s0, N, tr, tc);
                CHK(s0 % WE == 0, "gmem misaligned");
                CHK(((ll)(i*pitch + dc)*E) % (WE*E) == 0, "smem misaligned");
                CHK(dc + WE <= pitch, "cp.async past row");
                for (int k = 0; k < WE; ++k) if (!write(i, dc+k, s0+k, th)) return false;
              }
            }
            src += (ll)WR*cols;
          }
        }
      }
      for (int th = 0; th < nthr; ++th) {
        int ty = th / TW, tx = th % TW, tid = ty*TW+tx;
        int ox_in = TW == TH ? tx : tid % TH, oy0_in = TW == TH ? ty : tid / TH;
        ll oy0 = (ll)tc*TW + oy0_in; int y0 = (int)tr*TH; bool last_row = y0 + TH >= rows;
        ll dst = oy0*rows + y0 + ox_in; int base = (LEAD+ox_in)*pitch + oy0_in;
        unsigned s_bits = (unsigned)oy0*(unsigned)rows + (unsigned)y0;
        for (int j = 0; j < TW; j += OUT_ROWS) {
          int s = (int)(s_bits & (SECTOR-1)); int sh = shift(y0 - s + ox_in);
          auto st = [&](ll d, int fi) -> bool {
            CHK(fi >= 0 && fi < size, "smem read OOB");
            CHK(tt[fi] == tile_id, "smem read not written by this tile: tile %lld,%d row %d col %d", tr, tc, fi/pitch, fi%pitch);
            CHK(d >= 0 && d < N, "global write OOB");
            out[d] = tv[fi]; return true;
          };
          if (!checked) { if (!st(dst - s, base + j - s*pitch + sh)) return false; }
          else if ((int)oy0 + j < cols) {
            int ox = y0 - s + ox_in;
            if (ox >= 0 && ox < rows) if (!st(dst - s, base + j - s*pitch + sh)) return false;
            if (last_row && ox_in < s && ox + TH < rows) if (!st(dst - s + TH, base + j + (TH - s)*pitch + sh)) return false;
          }
          s_bits += (unsigned)OUT_ROWS*(unsigned)rows; dst += (ll)OUT_ROWS*rows;
        }
      }
    }
  }
  for (ll r = 0; r < rows; ++r) for (ll cc = 0; cc < cols; ++cc)
    CHK(out[cc*rows + r] == r*cols + cc, "wrong output r %lld c %lld got %lld", r, cc, out[cc*rows+r]);
  return true;
}
int main() {
  long runs = 0, bugs = 0;
  const char* AS[] = {"square","wide","tall"};
  for (int E : {2,4,8}) for (int TD : {16,32,64}) for (int as = 0; as < 3; ++as) for (int BR : {1,2,4,8,16,32})
  for (int PAD : {0,1,2}) for (int al = 0; al < 2; ++al) for (int TPB : {1,2}) {
    int TW = as == 1 ? 2*TD : TD, TH = as == 2 ? 2*TD : TD, S = 32/E;
    if (E == 2 && PAD < 1) continue;
    if (TH % BR || TH % S) continue;
    int T = TW*BR; if (T < 32 || T > 1024) continue;
    int OR = TW*BR/TH; if (OR < 1 || TW % OR) continue;
    if ((TH+S)*(TW+PAD*std::max(1,4/E))*E > 49152) continue;
    Cfg c{E, TD, as, BR, PAD, al == 1, TPB};
    int rs[] = {3*TH+1, 3*TH-1, 2*TH+S+2, 2*TH+S+3, 5, 4*TH+S/2};
    int cs[] = {3*TW+1, 3*TW+2, 2*TW-1, 3*TW, 7, TW+1};
    for (int r : rs) { if (r % S == 0) continue; for (int cc : cs) { ++runs;
      if (!emulate(c, r, cc)) { ++bugs; if (bugs < 40) printf("BUG E=%d TD=%d %s BR=%d PAD=%d %s TPB=%d shape %dx%d: %s\n", E, TD, AS[as], BR, PAD, al?"always":"edge", TPB, r, cc, msg); } } }
  }
  printf("runs %ld bugs %ld\n", runs, bugs);
}

#!/usr/bin/env python3
# Emulates, on the CPU, the index math of templates/transpose.cu.tera's RUNS=sector path for
# square tiles with BOUNDS=edge (VEC=1, 2-byte elements): the checked loader, the unchecked
# loader of READ=elem and READ=async (rows that start mid-word copied from the word before and
# kept shifted by one column in the tile), and the sector-aligned store phase. It transposes
# small odd shapes and asserts every output element. Why: READ=async was written in a session
# without a GPU; this checks its layout before the GPU tests can. It mirrors the template by
# hand, so change it with the template. Usage: python3 scripts/emulate_sector.py
def run(rows, cols, T, BR, read, pad_elems=2, E=2):
    SECTOR = 32 // E; LEAD = SECTOR; pitch = T + pad_elems
    WE = 2 if (read == 'async' and E == 2) else 1
    inn = [[(y * cols + x) for x in range(cols)] for y in range(rows)]
    flat = [v for row in inn for v in row]
    out = [None] * (rows * cols)
    tiles_y = (rows + T - 1) // T; tiles_x = (cols + T - 1) // T
    def shift(y): return ((y & cols) & 1) if WE == 2 else 0
    for tr in range(tiles_y):
        for tc in range(tiles_x):
            edge = tc == tiles_x - 1 or tr == tiles_y - 1 or tr == 0
            tile = [[None] * pitch for _ in range(T + LEAD)]
            top = tr * T - LEAD
            if edge:
                for ty in range(BR):
                    for tx in range(T):
                        xs = tc * T + tx
                        for j in range(0, T + LEAD, BR):
                            i = ty + j; y = top + i
                            if i > 0 and i < T + LEAD and y >= 0 and xs < cols and y < rows:
                                tile[i][tx + shift(y)] = inn[y][xs]
            else:
                if read == 'elem':
                    for ty in range(BR):
                        for tx in range(T):
                            for j in range(0, T + LEAD, BR):
                                i = ty + j
                                if i > 0: tile[i][tx] = inn[top + i][tc * T + tx]
                else:
                    RW = T // WE; WR = BR * WE
                    for ty in range(BR):
                        for tx in range(T):
                            tid = ty * T + tx; q = tid % RW; r = tid // RW
                            p = shift(top + r)
                            extra = p != 0 and q == RW - 1
                            src = (top + r) * cols + tc * T - p + q * WE
                            for j in range(0, T + LEAD, WR):
                                i = r + j
                                if i > 0 and i < T + LEAD:
                                    assert shift(top + i) == p
                                    for k in range(WE):
                                        assert 0 <= src + k < rows * cols
                                        tile[i][q * WE + k] = flat[src + k]
                                    if extra:
                                        for k in range(WE):
                                            assert src + WE + k < rows * cols
                                            tile[i][T + k] = flat[src + WE + k]
                                src += WR * cols
            y0 = tr * T
            last_row = y0 + T >= rows
            for ty in range(BR):
                for tx in range(T):
                    oy0 = tc * T + ty
                    for j in range(0, T, BR):
                        s = ((oy0 + j) * rows + y0) % SECTOR
                        sh = shift(y0 - s + tx)
                        dst = (oy0 + j) * rows + y0 + tx - s
                        def rd(row): 
                            v = tile[row][ty + j + sh]
                            assert v is not None, (tr, tc, row, ty + j + sh)
                            return v
                        if not edge:
                            out[dst] = rd(LEAD + tx - s)
                        elif oy0 + j < cols:
                            ox = y0 - s + tx
                            if 0 <= ox < rows: out[dst] = rd(LEAD + tx - s)
                            if last_row and tx < s and ox + T < rows:
                                out[dst + T] = rd(LEAD + tx - s + T)
    for c in range(cols):
        for r in range(rows):
            assert out[c * rows + r] == inn[r][c], (rows, cols, r, c, out[c * rows + r])
    return True
for read in ['elem', 'async']:
    for rows, cols in [(77, 51), (100, 99), (51, 77), (99, 100), (130, 67)]:
        for T, BR in [(16, 4), (32, 8), (16, 16)]:
            run(rows, cols, T, BR, read)
    print(read, 'ok')

# Every rectangle with 2-D prefix sums: O(N^2 M^2), too slow for the large tests.
import sys

data = sys.stdin.read().split()
n, m = int(data[0]), int(data[1])
grid = [list(map(int, data[2 + r * m : 2 + (r + 1) * m])) for r in range(n)]
prefix = [[0] * (m + 1) for _ in range(n + 1)]
for r in range(n):
    for c in range(m):
        prefix[r + 1][c + 1] = grid[r][c] + prefix[r][c + 1] + prefix[r + 1][c] - prefix[r][c]
best = grid[0][0]
for r1 in range(n):
    for r2 in range(r1 + 1, n + 1):
        for c1 in range(m):
            for c2 in range(c1 + 1, m + 1):
                best = max(best, prefix[r2][c2] - prefix[r1][c2] - prefix[r2][c1] + prefix[r1][c1])
print(best)

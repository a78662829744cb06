export const graph = null;

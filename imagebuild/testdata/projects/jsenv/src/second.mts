export const makeGraph = () => null;

/** The Broker contract on the in-process broker: three nodes on one MemoryBus. */
import { MemoryBus } from '../../src/broker/memory.ts';
import { brokerContract } from './broker.contract.ts';

brokerContract('MemoryBroker', async () => {
  const bus = new MemoryBus();
  const brokers = [bus.broker('node-a'), bus.broker('node-b'), bus.broker('node-c')] as const;
  return {
    brokers: [...brokers],
    close: async () => {
      for (const broker of brokers) await broker.close();
    },
  };
});

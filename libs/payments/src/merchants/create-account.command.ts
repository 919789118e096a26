import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Account, Registry } from '.';

/** The operator opens a merchant account. */
export class CreateAccount extends Command<Account> {
  constructor(
    readonly name: string,
    readonly email: string,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(CreateAccount)
export class CreateAccountHandler implements ICommandHandler<CreateAccount> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(command: CreateAccount): Promise<Account> {
    return this.registry.createAccount(command.name, command.email, command.now);
  }
}
